"""The largest batch that fits, from allocation traces recorded at two or three small batches.

A training step's allocation stream has the same shape at every batch size: the same allocations
and frees in the same order, only the sizes change, each by its own rule (parameters, gradients
and optimizer state not at all, activations in proportion to the batch, some as a constant plus a
multiple). learn() lines up the traces recorded at batches b1 < b2 [< b3] event by event (memtrace
v1, docs/trace_format.md), checks that they have that one shape, and fits each allocation's size
as a + c*batch through the smallest and largest batch (a third trace, when given, must then agree
exactly: it is the check that the rule is linear). synthesize() writes the stream at any batch,
and search() replays synthesized streams through vram's own allocator (`vram replay`, on a
simulated CUDA device by default) to find the largest batch with no out-of-memory error: doubling,
then bisection, every try a replay, none a run of the program. Rounding, caching and
fragmentation are the allocator's own, so the prediction is of reserved memory, not only of
live bytes.

    python -m vram_torch fit --capacity 40GiB [--vram PATH] [--device cudasim] [--max-batch N]
                             [--json] B1=TRACE B2=TRACE [B3=TRACE]
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile


class FitError(ValueError):
    """Traces that cannot be fitted, or a search that could not run; the message says why."""


def load_trace(path):
    """The events of a memtrace v1 file (plain or gzip) as tuples: ("a", index, size, stream) and
    ("f", index), where index numbers the allocations in order of appearance."""
    opener = gzip.open if _is_gzip(path) else open
    events, ids, count = [], {}, 0
    with opener(path, "rt") as f:
        first = True
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            if first:
                if line != "# memtrace v1":
                    raise FitError("%s: not a memtrace v1 file (first line %r)" % (path, line[:40]))
                first = False
                continue
            if line.startswith("#"):
                continue
            p = line.split()
            try:
                if p[0] == "a" and len(p) == 4:
                    if p[1] in ids:
                        raise FitError("%s line %d: id %s allocated twice" % (path, n, p[1]))
                    ids[p[1]] = count
                    count += 1
                    events.append(("a", ids[p[1]], int(p[2]), int(p[3])))
                elif p[0] == "f" and len(p) == 2:
                    events.append(("f", ids.pop(p[1]) if p[1] in ids else _unknown(path, n, p[1])))
                else:
                    raise FitError("%s line %d: not a record: %r" % (path, n, line[:60]))
            except ValueError as e:
                if isinstance(e, FitError):
                    raise
                raise FitError("%s line %d: bad number in %r" % (path, n, line[:60]))
    if first:
        raise FitError("%s: empty file" % path)
    return events


def _unknown(path, n, ident):
    raise FitError("%s line %d: free of unknown id %s" % (path, n, ident))


def _is_gzip(path):
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def learn(traces, lenient=False, sites=None):
    """traces: {batch: events} with at least two batches. Returns the model: a list of
    ("a", index, base, per_batch, stream) and ("f", index), the size at batch b being
    base + per_batch * b. FitError when the traces differ in shape or a size is not linear.
    lenient (for traces of real programs, whose library workspaces need not follow the batch):
    a size is never predicted below what was seen; one that shrinks as the batch grows is taken as
    its largest seen, one off the line or not a whole number of bytes per element as the line
    through the two largest batches, rounded up. sites ({batch: the Python stack's name of each
    allocation}, fit_align.py), with two traces: streams of different shapes are lined up, and
    an allocation one batch has and the other lacks is taken at the size seen."""
    if sites and len(traces) == 2 and not _same_shape(*[traces[b] for b in sorted(traces)]):
        return _learn_aligned(traces, sites)
    if len(traces) < 2:
        raise FitError("fit needs traces at two or three batch sizes, got %d" % len(traces))
    batches = sorted(traces)
    if batches[0] < 1:
        raise FitError("batch sizes must be at least 1, got %d" % batches[0])
    lo, hi = traces[batches[0]], traces[batches[-1]]
    for b in batches[1:]:
        if len(traces[b]) != len(lo):
            raise FitError("the trace at batch %d has %d events, the one at batch %d %d: the program allocates "
                           "differently at different batches, which fit cannot model" % (b, len(traces[b]), batches[0],
                                                                                          len(lo)))
    model = []
    db = batches[-1] - batches[0]
    for k, e in enumerate(lo):
        for b in batches[1:]:
            o = traces[b][k]
            if o[0] != e[0] or o[1] != e[1] or (e[0] == "a" and o[3] != e[3]):
                raise FitError("event %d differs between the traces at batch %d and %d (%s / %s): the allocation "
                               "order depends on the batch" % (k, batches[0], b, _show(e), _show(o)))
        if e[0] == "f":
            model.append(e)
            continue
        s_lo, s_hi = e[2], hi[k][2]
        if lenient:
            model.append(("a", e[1]) + _lenient_rule([(b, traces[b][k][2]) for b in batches]) + (e[3],))
            continue
        if (s_hi - s_lo) % db:
            raise FitError("allocation %d (event %d): %d bytes at batch %d, %d at batch %d: not a whole number of "
                           "bytes per batch element" % (e[1], k, s_lo, batches[0], s_hi, batches[-1]))
        per = (s_hi - s_lo) // db
        base = s_lo - per * batches[0]
        for b in batches[1:-1]:
            if base + per * b != traces[b][k][2]:
                raise FitError("allocation %d (event %d) does not grow linearly with the batch: %d, %d, %d bytes at "
                               "batches %s" % (e[1], k, s_lo, traces[b][k][2], s_hi, batches))
        model.append(("a", e[1], base, per, e[3]))
    return model


def _same_shape(lo, hi):
    return len(lo) == len(hi) and all(a[0] == b[0] and a[1] == b[1] and (a[0] == "f" or a[3] == b[3])
                                      for a, b in zip(lo, hi))


def _learn_aligned(traces, sites):
    from .fit_align import AlignError, align
    b_lo, b_hi = sorted(traces)
    try:
        unified = align(traces[b_lo], traces[b_hi], sites[b_lo], sites[b_hi])
    except AlignError as e:
        raise FitError("the traces at batch %d and %d cannot be lined up: %s" % (b_lo, b_hi, e))
    model = []
    for e in unified:
        if e[0] == "f":
            model.append(e)
        elif e[2] is not None and e[3] is not None:
            model.append(("a", e[1]) + _lenient_rule([(b_lo, e[2]), (b_hi, e[3])]) + (e[4],))
        else:
            model.append(("a", e[1], e[2] if e[2] is not None else e[3], 0, e[4]))
    return model


def _lenient_rule(points):
    """(base, per_batch) for one allocation's (batch, size) points, sorted by batch: the line
    through the two largest batches, per_batch rounded up, never below a size seen."""
    (b1, s1), (b2, s2) = points[-2], points[-1]
    if s2 <= s1:  # not growing with the batch
        return max(s for _, s in points), 0
    per = -(-(s2 - s1) // (b2 - b1))
    base = s2 - per * b2
    for b, s in points:  # the line must cover every size seen
        base = max(base, s - per * b)
    return max(base, 0), per  # (a size that grows faster than the batch: none below 0 at batch 1)


def _show(e):
    return " ".join(str(x) for x in e)


def synthesize(model, batch):
    """The memtrace v1 text of the stream at `batch`. FitError where a size would be negative."""
    out = ["# memtrace v1", "# source: vram_torch fit, synthesized at batch %d" % batch]
    for e in model:
        if e[0] == "f":
            out.append("f %d" % e[1])
            continue
        size = e[2] + e[3] * batch
        if size < 0:
            raise FitError("allocation %d would be %d bytes at batch %d" % (e[1], size, batch))
        out.append("a %d %d %d" % (e[1], size, e[4]))
    return "\n".join(out) + "\n"


def replay(vram, text, capacity, device="cudasim", conf=None):
    """Replays trace text with `vram replay --json` on `device` of `capacity` bytes (with conf:
    those VRAM_ALLOC_CONF options): the result's JSON object (peak_reserved_bytes, oom, ...).
    FitError when vram cannot replay it at all."""
    with tempfile.NamedTemporaryFile("w", suffix=".trace", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        p = subprocess.run([vram, "replay", "--json", "--device", device, "--capacity", str(capacity)]
                           + (["--conf", conf] if conf else []) + [path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        os.unlink(path)
    if p.returncode not in (0, 1) or not p.stdout.strip():
        raise FitError("vram replay failed (status %d): %s" % (p.returncode, p.stderr.strip()[:500]))
    return json.loads(p.stdout.splitlines()[0])


MAX_WORKSPACES_DROPPED = 64  # per replayed batch: beyond it the batch is taken as not fitting


def workspaces(model):
    """The model's indices of allocations freed by the very next event: a library's workspace,
    used inside one operation (cuDNN's convolutions: theirs is the pattern the recordings show)."""
    return {k for k in range(len(model) - 1)
            if model[k][0] == "a" and model[k + 1][0] == "f" and model[k + 1][1] == model[k][1]}


def search(model, capacity, vram, device="cudasim", max_batch=1 << 20, conf=None, elastic=False):
    """The largest batch in [1, max_batch] whose synthesized stream replays with no out-of-memory
    error on `device` of `capacity` bytes: (batch, its replay result, replays made). batch 0 when
    batch 1 does not fit (the result is then batch 1's).

    elastic: a workspace (workspaces()) whose allocation fails is taken as given up, and the replay
    runs again with it at 0 bytes: PyTorch's cuDNN convolutions catch the out-of-memory error of a
    workspace and try plans that need less, down to none, so under a cap the program asks less
    than its uncapped recordings show. The result then says how many were given up
    ("workspaces_dropped"); any other failing allocation is an out-of-memory as before."""
    tried, results = 0, {}
    elastic_at = workspaces(model) if elastic else set()

    def fits(b):
        nonlocal tried
        m, dropped = model, 0
        while True:
            tried += 1
            res = replay(vram, synthesize(m, b), capacity, device, conf)
            k = res.get("failed_event")
            if (not res["oom"] or k not in elastic_at or dropped == MAX_WORKSPACES_DROPPED
                    or m[k][2] + m[k][3] * b == 0):
                break
            m = m[:k] + [("a", m[k][1], 0, 0, m[k][4])] + m[k + 1:]
            dropped += 1
        res["workspaces_dropped"] = dropped
        results[b] = res
        return not res["oom"]

    lo, hi, b = 0, None, 1
    while True:  # doubling until one fails
        if not fits(b):
            hi = b
            break
        lo = b
        if b == max_batch:
            break
        b = min(2 * b, max_batch)
    while hi is not None and lo and hi - lo > 1:  # bisection
        mid = lo + (hi - lo) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, results[lo if lo else 1], tried


def find_vram(given=None):
    """The vram executable: `given`, else $VRAM, else `vram` on PATH."""
    exe = given or os.environ.get("VRAM") or shutil.which("vram")
    if not exe or not os.access(exe, os.X_OK):
        raise FitError("no vram executable (give --vram PATH, set VRAM, or put vram on PATH)")
    return exe


def parse_size(text):
    """'40GiB', '512MiB', '1000000' -> bytes."""
    units = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "KB": 10 ** 3,
             "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12}
    t = text.strip()
    i = len(t)
    while i and not (t[i - 1].isdigit() or t[i - 1] == "."):
        i -= 1
    try:
        value = float(t[:i]) * units[t[i:]]
    except (KeyError, ValueError):
        raise FitError("'%s' is not a size (e.g. 40GiB)" % text)
    if value < 1:
        raise FitError("'%s' is not a size above zero" % text)
    return int(value)


def main(argv):
    import argparse
    p = argparse.ArgumentParser(prog="python -m vram_torch fit",
                                description="the largest batch that fits, from traces recorded at small batches")
    p.add_argument("--capacity", required=True, help="device memory, e.g. 40GiB")
    p.add_argument("--vram", help="the vram executable (default $VRAM or vram on PATH)")
    p.add_argument("--device", default="cudasim", help="replay device kind (default cudasim)")
    p.add_argument("--max-batch", type=int, default=1 << 20)
    p.add_argument("--json", action="store_true")
    p.add_argument("traces", nargs="+", metavar="BATCH=TRACE")
    a = p.parse_args(argv)
    try:
        capacity = parse_size(a.capacity)
        traces = {}
        for spec in a.traces:
            b, sep, path = spec.partition("=")
            if not sep or not b.isdigit():
                raise FitError("'%s' is not BATCH=TRACE (e.g. 4=run_b4.trace)" % spec)
            if int(b) in traces:
                raise FitError("batch %s given twice" % b)
            traces[int(b)] = load_trace(path)
        if a.max_batch < 1:
            raise FitError("--max-batch must be at least 1")
        model = learn(traces)
        batch, res, tried = search(model, capacity, find_vram(a.vram), a.device, a.max_batch)
    except (FitError, OSError) as e:  # bad input: one line, status 2
        print("vram_torch fit: %s" % e, file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps({"capacity": capacity, "batch": batch, "replays": tried,
                          "peak_reserved_bytes": res.get("peak_reserved_bytes"), "oom": res.get("oom")}))
    elif batch:
        print("largest batch that fits in %d bytes: %d (peak reserved %d bytes on %s, %d replays)" % (
            capacity, batch, res["peak_reserved_bytes"], res.get("device", a.device), tried))
    if not batch:
        print("vram_torch fit: batch 1 does not fit in %d bytes: %s" % (capacity, res.get("error", "")), file=sys.stderr)
    return 0 if batch else 1
