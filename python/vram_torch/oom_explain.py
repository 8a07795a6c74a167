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
forward: the modules with parameters still to run sized by their output shapes where
forward_shapes.py knows them (convolutional nets), else taken to save as much each as the last
quarter run did, or by the part done, counted in such calls), state = the
optimizer state (as held, or from the last completed step, or, before any step, what the
optimizers known from their construction will make: state_bytes()), gradients = as held, or the
trainable bytes. Where an earlier step at this batch completed, the variable part is never below
that step's at its peak. Reserved is predicted as allocated times the reserved-over-allocated
ratio of that moment.

A failure in the first step's forward has seen no backward pass (often the step's peak): the
step is then estimated ("estimate": true, its basis in the lines): backward starts at the loss
holding the gradient of the largest tensor and the gradient it hands on, 1.5x the larger of the
failing request and the largest tensor saved since the last module with parameters began (the
output end's tensors, as far as forward came), added to the variable part. Not 2x: the largest is
most often the loss's input (the logits), whose producer's gradient is narrower (bf16 logits
upcast to f32) or made after the logits are freed; docs/plan.md gives the runs that set it.
"""

STATE_FACTOR = {"Adam": 2, "AdamW": 2, "NAdam": 2, "RAdam": 2, "Adamax": 2, "Adagrad": 1, "RMSprop": 1,
                "SGD": 1, "Adadelta": 2, "LBFGS": 2}


def state_bytes(info):
    """The optimizer state the optimizers in `info` (tracker._optimizer_info's) make at their first
    step, in bytes: per parameter byte 2 for Adam/AdamW (3 with amsgrad), SGD's momentum buffer
    (none without momentum), RMSprop's square average (+ momentum buffer, + centered average)."""
    total = 0
    for o in info:
        name = o.get("name")
        if name == "SGD":
            factor = 1 if o.get("momentum") else 0
        elif name in ("Adam", "AdamW"):
            factor = 3 if o.get("amsgrad") else 2
        elif name == "RMSprop":
            factor = 1 + bool(o.get("momentum")) + bool(o.get("centered"))
        else:
            factor = STATE_FACTOR.get(name, 2)
        total += factor * o.get("param_bytes", 0)
    return total


def _mib(n):
    return "%.2f MiB" % (n / 2 ** 20)


def _grows(cats):
    """The bytes of a moment's categories that grow with the batch."""
    return cats.get("activations", 0) + cats.get("temporaries", 0) + cats.get("other", 0)


def explain(oom):
    """{"at_failure": {...}, "reserved_but_free", "remedies": [{name, change, peak_allocated,
    peak_reserved, fits, estimate}], "lines": [...],
    "step_peak_allocated" (the failed step's own, as modelled), "estimate" (no backward pass
    seen: the step estimated from its forward)} for the figures `oom` (tracker.py's), or None."""
    if not oom:
        return None
    c = dict(oom["categories"])
    request = oom["request"]
    fixed = c.get("parameters", 0) + c.get("buffers", 0)
    # activations grow through forward: those of the whole forward, from how far it came: the
    # modules with parameters still to run saving as much each as the last quarter run did
    # (convolutional nets save less as they go deeper), else in proportion to the part done
    progress = min(1.0, max(oom.get("forward_progress", 1.0), 0.05))
    rest = oom.get("forward_rest") if oom.get("phase") == "forward" else None
    shaped = oom.get("forward_rest_shapes") if oom.get("phase") == "forward" else None
    if shaped:
        activations = c.get("activations", 0) + shaped[1]
        how = "%d modules with parameters still to run, %s by their output shapes (convolutions' strides and " \
              "channels) at what the last quarter run saved per output element" % (shaped[0], _mib(shaped[1]))
    elif rest:
        activations = c.get("activations", 0) + int(rest[0] * rest[1])
        how = "%d modules with parameters still to run, %s each as the last quarter run" % (rest[0], _mib(rest[1]))
    else:
        activations = int(c.get("activations", 0) / progress)
        how = "%.0f%% of it done, by calls of modules with parameters" % (100 * progress)
    variable = activations + c.get("temporaries", 0) + c.get("other", 0) + request
    info = oom.get("optimizer_info") or []
    trainable = max(oom.get("trainable_bytes", 0), sum(o.get("param_bytes", 0) for o in info))
    grads = max(c.get("gradients", 0), trainable)
    state = c.get("optimizer_state", 0)
    last = oom.get("last_step")
    if last:
        for w in last["phases"].values():
            state = max(state, w["own_peak"].get("optimizer_state", 0))
    if not state and info:
        state = state_bytes(info)
    elif not state and oom.get("optimizers"):
        factor = max(STATE_FACTOR.get(name, 2) for name in oom["optimizers"])
        state = factor * trainable
    estimate = not last and oom.get("phase") == "forward"  # no backward pass seen yet
    largest = max(request, oom.get("largest_recent", 0))
    if estimate:  # backward's start: the largest tensor's gradient and the one it hands on
        variable += 3 * largest // 2
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
    for r in remedies:
        r["estimate"] = estimate
    free = max(0, oom["reserved"] - oom["allocated"])
    lines = ["vram_torch: out of memory in step %d (%s), allocating %s; limit %s" % (
        oom["step"], oom["phase"], _mib(request), _mib(limit)),
        "  categories at the failure: " + ", ".join("%s %s" % (k, _mib(v)) for k, v in c.items() if v),
        "  reserved but free: %s of %s reserved (%.1f%%)" % (_mib(free), _mib(oom["reserved"]),
                                                           100.0 * free / oom["reserved"] if oom["reserved"] else 0.0)]
    if estimate:
        names = ", ".join(sorted({o["name"] for o in info})) or ", ".join(oom.get("optimizers") or []) or "none known"
        lines.append("  the failure came in step %d's forward pass, before any step completed: the step is an ESTIMATE, "
                     "not a measurement: activations of the whole forward %s (%s), gradients %s (the trainable "
                     "parameters), optimizer state %s (%s), and backward's start as 1.5 x the largest recent tensor (%s: "
                     "its gradient and the one it hands on); `python -m vram_torch fit` predicts from whole recorded steps" % (
                         oom["step"], _mib(activations), how, _mib(grads), _mib(state), names, _mib(largest)))
    for r in remedies:
        lines.append("  %s (%s): peak ~%s allocated, ~%s reserved%s: %s" % (
            r["name"], r["change"], _mib(r["peak_allocated"]), _mib(r["peak_reserved"]),
            " (estimated)" if estimate else "", "fits" if r["fits"] else "does not fit"))
    return {"at_failure": oom, "reserved_but_free": free, "remedies": remedies, "lines": lines,
            "step_peak_allocated": int(fixed + state + grads + variable), "estimate": estimate}
