"""category_report.py — the record `python -m vram_torch run --categories` writes: memory by
category per step and phase, as data, JSON and a table; pure Python, tested on recorded numbers.

A window of the plug-in (src/torch/categories.cpp: the allocated peak with each tag's bytes then,
the reserved peak with the allocated bytes then, each tag's own peak) becomes a phase record W
(window_record); phases that repeat in a step (micro-batches) merge, the higher peak keeping its
breakdown (merge). The record: {"format": FORMAT, "device", "program", "categories", "steps":
[{"step", "phases": {"forward": W, ...}, "end": {"allocated", "reserved", "categories"}}], "run":
W, "notes"}. W: peak_allocated, reserved_at_peak_allocated, peak_reserved,
allocated_at_peak_reserved, reserved_but_free and fragmentation (at the reserved peak),
at_peak_allocated {category: bytes} (adds up to peak_allocated), own_peak {category: bytes}.
"""
import json

FORMAT = "vram_torch categories v1"
# The allocator's tags (vram/stats.h) and the one the plug-in registers ("buffer", categories.cpp),
# by number, with the names the record uses.
TAGS = ["other", "parameters", "gradients", "optimizer_state", "activations", "temporaries", "kv_cache", "buffers"]
TAG = {name: i for i, name in enumerate(TAGS)}
SHOWN = ["parameters", "buffers", "gradients", "optimizer_state", "activations", "temporaries", "other"]
PHASES = ["other", "forward", "backward", "optimizer"]
TAG_MAX = 32
FIXED = 6  # the window's figures before its three rows of tags (categories.cpp)
WINDOW_SIZE = FIXED + 3 * TAG_MAX


def window_record(v):
    """A phase record from a window's numbers (the layout of categories.cpp)."""
    if len(v) != WINDOW_SIZE:
        raise ValueError("a window has %d numbers, not %d" % (WINDOW_SIZE, len(v)))

    def tags(row):
        base = FIXED + row * TAG_MAX
        out = {name: int(v[base + i]) for i, name in enumerate(TAGS)}
        extra = sum(v[base + len(TAGS):base + TAG_MAX])
        if extra:  # tags a program registered itself
            out["user_tags"] = int(extra)
        return out
    w = {"peak_allocated": int(v[0]), "reserved_at_peak_allocated": int(v[1]), "peak_reserved": int(v[2]),
         "allocated_at_peak_reserved": int(v[3]), "at_peak_allocated": tags(0), "own_peak": tags(1)}
    _derive(w)
    return w


def _derive(w):
    free = w["peak_reserved"] - w["allocated_at_peak_reserved"]
    w["reserved_but_free"] = max(0, free)
    w["fragmentation"] = round(w["reserved_but_free"] / w["peak_reserved"], 4) if w["peak_reserved"] else 0.0


def now_record(v):
    """{"allocated", "reserved", "categories"} from a window's "now" figures."""
    base = FIXED + 2 * TAG_MAX
    cats = {name: int(v[base + i]) for i, name in enumerate(TAGS)}
    extra = sum(v[base + len(TAGS):base + TAG_MAX])
    if extra:
        cats["user_tags"] = int(extra)
    return {"allocated": int(v[4]), "reserved": int(v[5]), "categories": cats}


def merge(a, b):
    """The record of two windows taken together (either may be None)."""
    if a is None or b is None:
        return dict(b if a is None else a) if (a or b) else None
    out = dict(a if a["peak_allocated"] >= b["peak_allocated"] else b)
    r = a if a["peak_reserved"] >= b["peak_reserved"] else b
    out["peak_reserved"], out["allocated_at_peak_reserved"] = r["peak_reserved"], r["allocated_at_peak_reserved"]
    keys = set(a["own_peak"]) | set(b["own_peak"])
    out["own_peak"] = {k: max(a["own_peak"].get(k, 0), b["own_peak"].get(k, 0)) for k in keys}
    _derive(out)
    return out


def check_sums(record):
    """The places where the categories do not add up to the allocated bytes: [(where, sum,
    allocated)], empty when they all do (at every phase's peak and every step's end)."""
    bad = []

    def one(where, cats, total):
        if sum(cats.values()) != total:
            bad.append((where, sum(cats.values()), total))
    for s in record["steps"]:
        for phase, w in s["phases"].items():
            one("step %s %s peak" % (s["step"], phase), w["at_peak_allocated"], w["peak_allocated"])
        one("step %s end" % s["step"], s["end"]["categories"], s["end"]["allocated"])
    if record.get("run"):
        one("run peak", record["run"]["at_peak_allocated"], record["run"]["peak_allocated"])
    return bad


def mib(n):
    return "%.2f" % (n / 2 ** 20)


def format_table(record):
    """The table `run --categories` prints: a row per step and phase, MiB."""
    cats = SHOWN + [k for k in ("kv_cache", "user_tags") if any(
        w["at_peak_allocated"].get(k) for s in record["steps"] for w in s["phases"].values())]
    short = {"parameters": "params", "buffers": "buffers", "gradients": "grads", "optimizer_state": "optim",
             "activations": "activ", "temporaries": "temps", "other": "other", "kv_cache": "kv", "user_tags": "user"}
    head = ["step", "phase", "allocated"] + [short[c] for c in cats] + ["reserved", "free", "frag"]
    rows = []
    for s in record["steps"]:
        for phase in PHASES:
            w = s["phases"].get(phase)
            if not w:
                continue
            rows.append([str(s["step"]), phase, mib(w["peak_allocated"])]
                        + [mib(w["at_peak_allocated"].get(c, 0)) for c in cats]
                        + [mib(w["peak_reserved"]), mib(w["reserved_but_free"]), "%.1f%%" % (100 * w["fragmentation"])])
    if record.get("run"):
        w = record["run"]
        rows.append(["run", "peak", mib(w["peak_allocated"])] + [mib(w["at_peak_allocated"].get(c, 0)) for c in cats]
                    + [mib(w["peak_reserved"]), mib(w["reserved_but_free"]), "%.1f%%" % (100 * w["fragmentation"])])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = ["vram_torch categories (MiB; each row: the phase's peak allocated and the categories at that "
             "moment; reserved: the phase's peak; free: reserved but free then)"]
    for r in [head] + rows:
        lines.append("  ".join(c.rjust(wd) if i > 1 else c.ljust(wd) for i, (c, wd) in enumerate(zip(r, widths))))
    for note in record.get("notes", []):
        lines.append("note: " + note)
    return "\n".join(lines)


def write_json(record, path):
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


def load_json(path):
    """A categories record from a file; ValueError when it is not one."""
    with open(path) as f:
        try:
            record = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError("%s: not JSON (%s)" % (path, e))
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError("%s: not a %s file" % (path, FORMAT))
    return record
