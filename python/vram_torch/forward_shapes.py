"""forward_shapes.py — the output sizes of the modules a failed forward had yet to run, for
explain_oom (tracker.py gathers, oom_explain.py uses): a convolutional net saves less for
backward as it goes deeper (each stage halves its spatial size and doubles its channels), so the
rest of its forward is not the recent modules' rate again.

rest_numel(modules, spatial, batch) walks the modules still to run in their registration order
(a plain description of each: kind and the attributes that fix its output) and propagates the
spatial size of each channel count: a convolution's output from the last output seen with its
input channels (its padding, stride, dilation, kernel: PyTorch's formula), a 2-D batch norm at
the size of the last output with its channels, a linear layer on flattened features (batch x
out_features). Any other module, or a size not known, and the answer is None: the caller falls
back to the recent rate.
"""


def describe(module):
    """A module's description for rest_numel, or None for a kind it does not know."""
    kind = type(module).__name__
    try:
        if kind == "Conv2d":
            return {"kind": "conv", "in": module.in_channels, "out": module.out_channels,
                    "kernel": tuple(module.kernel_size), "stride": tuple(module.stride),
                    "padding": tuple(module.padding), "dilation": tuple(module.dilation)}
        if kind == "BatchNorm2d":
            return {"kind": "bn", "channels": module.num_features}
        if kind == "Linear":
            return {"kind": "linear", "out": module.out_features}
    except (AttributeError, TypeError):  # (a string padding such as "same": not known here)
        return None
    return None


def conv_out(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def rest_numel(modules, spatial, batch):
    """The elements of each module's output (a list), for `modules` (describe()'s, in order),
    given spatial {channels: (height, width)} of the outputs seen so far (updated here), and the
    batch; None when a module or a size is not known."""
    out = []
    for d in modules:
        if d is None:
            return None
        if d["kind"] == "conv":
            if d["in"] not in spatial or not isinstance(d["padding"][0], int):
                return None
            h, w = spatial[d["in"]]
            h, w = (conv_out(x, k, s, p, dl) for x, k, s, p, dl in zip((h, w), d["kernel"], d["stride"], d["padding"],
                                                                       d["dilation"]))
            if h < 1 or w < 1:
                return None
            spatial[d["out"]] = (h, w)
            out.append(batch * d["out"] * h * w)
        elif d["kind"] == "bn":
            if d["channels"] not in spatial:
                return None
            h, w = spatial[d["channels"]]
            out.append(batch * d["channels"] * h * w)
        else:
            out.append(batch * d["out"])
    return out
