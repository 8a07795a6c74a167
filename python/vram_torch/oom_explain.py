"""oom_explain.py — why a PyTorch program ran out of memory under vram, and what would fit.
Pure Python over the figures tracker.py takes at the failing allocation (its out-of-memory
observer), so that it is tested on recorded numbers.

The figures: the categories' bytes at the failure, allocated, reserved, the request, the limit,
the step and phase, the bytes of the trainable parameters, the optimizers in use, and the last
step that completed (if any). The remedies and their predicted peaks (allocated bytes):

  batch halved                 fixed + state + gradients + variable / 2
  gradient accumulation (x2)   the same peak (half the batch at a time; the gradients of the
                               first micro-batch are held while the second runs), same batch
                               per optimizer step

where fixed = parameters + buffers, variable = activations + temporaries + inputs/other + the
failing request (what grows with the batch; in forward the activations are scaled to the whole
forward by the part of it done, counted in module calls), state = the optimizer state (as held, or from the
last completed step, or, before any step, 2x the trainable bytes for Adam-like optimizers, 1x for
SGD with momentum / Adagrad), gradients = as held, or the trainable bytes. Where an earlier step
at this batch completed, the variable part is never below that step's at its peak. Reserved is
predicted as allocated times the reserved-over-allocated ratio of that moment.

A failure in the first step's forward has seen no backward pass (often the step's peak): the
report says so and its peaks are lower bounds ("lower_bound": true, "at least").
"""

STATE_FACTOR = {"Adam": 2, "AdamW": 2, "NAdam": 2, "RAdam": 2, "Adamax": 2, "Adagrad": 1, "RMSprop": 1,
                "SGD": 1, "Adadelta": 2, "LBFGS": 2}


def _mib(n):
    return "%.2f MiB" % (n / 2 ** 20)


def _grows(cats):
    """The bytes of a moment's categories that grow with the batch."""
    return cats.get("activations", 0) + cats.get("temporaries", 0) + cats.get("other", 0)


def explain(oom):
    """{"at_failure": {...}, "reserved_but_free", "remedies": [{name, change, peak_allocated,
    peak_reserved, fits, lower_bound}], "lines": [...], "step_peak_allocated" (the failed step's
    own, as modelled)} for the figures `oom` (tracker.py's), or None."""
    if not oom:
        return None
    c = dict(oom["categories"])
    request = oom["request"]
    fixed = c.get("parameters", 0) + c.get("buffers", 0)
    # activations grow through forward: those of the whole forward, from how far it came
    progress = min(1.0, max(oom.get("forward_progress", 1.0), 0.05))
    variable = int(c.get("activations", 0) / progress) + c.get("temporaries", 0) + c.get("other", 0) + request
    grads = max(c.get("gradients", 0), oom.get("trainable_bytes", 0))
    state = c.get("optimizer_state", 0)
    last = oom.get("last_step")
    if last:
        for w in last["phases"].values():
            state = max(state, w["own_peak"].get("optimizer_state", 0))
    if not state and oom.get("optimizers"):
        factor = max(STATE_FACTOR.get(name, 2) for name in oom["optimizers"])
        state = factor * oom.get("trainable_bytes", 0)
    if last:  # an earlier step at this batch completed: its peak was at least this high
        peak_w = max(last["phases"].values(), key=lambda w: w["peak_allocated"])
        variable = max(variable, _grows(peak_w["at_peak_allocated"]))
    ratio = oom["reserved"] / oom["allocated"] if oom["allocated"] else 1.0
    halved = fixed + state + grads + variable // 2
    limit = oom["limit"]
    remedies = []
    for name, change in (("batch halved", "batch / 2"),
                         ("gradient accumulation (2 micro-batches)", "batch / 2, 2 backward passes per optimizer step")):
        remedies.append({"name": name, "change": change, "peak_allocated": int(halved),
                         "peak_reserved": int(halved * ratio), "fits": halved * ratio <= limit})
    unseen = not last and oom.get("phase") == "forward"  # no backward pass seen yet: a lower bound
    for r in remedies:
        r["lower_bound"] = unseen
    free = max(0, oom["reserved"] - oom["allocated"])
    lines = ["vram_torch: out of memory in step %d (%s), allocating %s; limit %s" % (
        oom["step"], oom["phase"], _mib(request), _mib(limit)),
        "  categories at the failure: " + ", ".join("%s %s" % (k, _mib(v)) for k, v in c.items() if v),
        "  reserved but free: %s of %s reserved (%.1f%%)" % (_mib(free), _mib(oom["reserved"]),
                                                           100.0 * free / oom["reserved"] if oom["reserved"] else 0.0)]
    if unseen:
        lines.append("  the failure came in step %d's forward pass, before any step completed: the backward pass is "
                     "not seen, so the peaks below are lower bounds (forward, parameters, gradients, optimizer state); "
                     "`python -m vram_torch fit` predicts from whole recorded steps" % oom["step"])
    for r in remedies:
        lines.append("  %s (%s): peak %s%s allocated, %s%s reserved: %s" % (
            r["name"], r["change"], "at least " if unseen else "~", _mib(r["peak_allocated"]),
            "at least " if unseen else "~", _mib(r["peak_reserved"]),
            ("does not fit" if not r["fits"] else "may fit" if unseen else "fits")))
    return {"at_failure": oom, "reserved_but_free": free, "remedies": remedies, "lines": lines,
            "step_peak_allocated": int(fixed + state + grads + variable)}
