"""leak_finder.py — memory that survives step boundaries and grows step over step, named by category
and by the Python stack that allocated it. Pure Python over plain data, so that it is tested on
recorded blocks; tracker.py feeds it the live blocks at each step boundary.

At each boundary, observe(step, blocks) takes the live blocks: {address, size, category,
frames [(file, line, function), innermost first]}. A block is known by (address, size, frames):
one seen at the previous boundary is a survivor, one not seen is new. Blocks are grouped by
site (category and frames). A site *accumulates* at a boundary when it has survivors and new
blocks together and its bytes grew: earlier blocks are kept while more are added, which is what a
leak does (a summed loss tensor keeps every step's graph; a list keeps every output) and what
steady training does not (its buffers are made once; the next batch replaces the last). A site
that accumulates at `streak` consecutive boundaries (2: flagged at the third step) is a leak. A
report groups the leaking sites by category and by the innermost frames of the program itself
(not of torch, the standard library, installed packages or vram_torch), where the leak's memory
was allocated.
"""
import os

LIBRARY_MARKERS = (os.sep + "torch" + os.sep, os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep,
                   os.sep + "vram_torch" + os.sep, os.sep + "lib" + os.sep + "python3", "<frozen ", "<string>")


def user_frames(frames, n=3):
    """The innermost n frames outside libraries (the program's own lines, innermost first), or
    the innermost frame, or [] for a block allocated where no Python ran (the autograd engine's
    threads)."""
    own = [f for f in frames if not any(m in f[0] for m in LIBRARY_MARKERS)]
    return own[:n] if own else list(frames[:1])


def where(frames):
    """"file:line function <- file:line function ..." of user_frames, or a phrase for none."""
    own = user_frames(frames)
    if not own:
        return "no Python stack (allocated by the autograd engine or C++)"
    return " <- ".join("%s:%d %s" % (os.path.basename(f[0]), f[1], f[2]) for f in own)


class LeakFinder:
    def __init__(self, streak=2):
        self.streak = streak
        self.prev = None          # {block key: site} at the previous boundary
        self.prev_bytes = {}      # site -> bytes at the previous boundary
        self.runs = {}            # site -> consecutive accumulating boundaries
        self.history = []         # per boundary: {site: bytes}
        self.flagged = {}         # site -> {"first_step", "bytes": [...]}
        self.steps = []

    def observe(self, step, blocks):
        keys, site_bytes, new_sites, old_sites = {}, {}, set(), set()
        for b in blocks:
            frames = tuple(tuple(f) for f in b.get("frames", ()))
            site = (b.get("category", "other"), frames)
            key = (b["address"], b["size"], frames)
            keys[key] = site
            site_bytes[site] = site_bytes.get(site, 0) + b["size"]
            if self.prev is not None:
                (old_sites if key in self.prev else new_sites).add(site)
        if self.prev is not None:
            for site, n in site_bytes.items():
                grows = site in new_sites and site in old_sites and n > self.prev_bytes.get(site, 0)
                self.runs[site] = self.runs.get(site, 0) + 1 if grows else 0
                if self.runs[site] >= self.streak and site not in self.flagged:
                    self.flagged[site] = {"first_step": step}
            for site in list(self.runs):
                if site not in site_bytes:
                    self.runs[site] = 0
        self.prev, self.prev_bytes = keys, site_bytes
        self.history.append(site_bytes)
        self.steps.append(step)

    def leaks(self):
        """The leaks found: a list, largest growth first, of {category, where (file:line
        function of the program, or "no Python stack"), stack (the first site's frames),
        first_step (the boundary that flagged it), bytes_per_step (growth over the last
        boundaries), bytes (held at the last boundary), sites}."""
        groups = {}
        last = self.history[-1] if self.history else {}
        for site, info in self.flagged.items():
            cat, frames = site
            at = where(list(frames))
            g = groups.setdefault((cat, at), {"category": cat, "where": at, "stack": [list(f) for f in frames],
                                                 "first_step": info["first_step"], "bytes": 0, "growth": 0, "sites": 0})
            g["sites"] += 1
            g["first_step"] = min(g["first_step"], info["first_step"])
            g["bytes"] += last.get(site, 0)
            span = [h.get(site, 0) for h in self.history[-(self.streak + 1):]]
            g["growth"] += (span[-1] - span[0]) / max(1, len(span) - 1)
        out = []
        for g in groups.values():
            g["bytes_per_step"] = int(g.pop("growth"))
            out.append(g)
        return sorted(out, key=lambda g: -g["bytes_per_step"])

    def report(self):
        found = self.leaks()
        if len(self.steps) < self.streak + 1:
            return ("vram_torch leaks: %d step boundar%s seen; %d are needed to tell growth step over step"
                    % (len(self.steps), "y" if len(self.steps) == 1 else "ies", self.streak + 1))
        if not found:
            return "vram_torch leaks: none (%d step boundaries: no memory kept and added to step over step)" % len(self.steps)
        lines = ["vram_torch leaks: %d found (memory surviving step boundaries and growing step over step):" % len(found)]
        for g in found:
            lines.append("  %s: +%.2f MiB a step, %.2f MiB held at step %d, since step %d, allocated at %s (%d site%s)"
                         % (g["category"], g["bytes_per_step"] / 2 ** 20, g["bytes"] / 2 ** 20, self.steps[-1],
                            g["first_step"], g["where"], g["sites"], "" if g["sites"] == 1 else "s"))
        return "\n".join(lines)
