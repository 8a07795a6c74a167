"""test_vram_torch_categories_cpu.py — vram_torch's memory by category (tracker.py over
src/torch/categories.cpp) and its leak finder without PyTorch or a GPU: a stand-in `torch` with
the hooks the tracker uses (global module pre-hooks, saved-tensor hooks, torch.autograd.backward,
global optimizer step hooks, post-accumulate-grad hooks), whose tensors are allocated through the
real libvram_torch.so over the fake driver (tests/fakes/fake_cuda.c), as PyTorch's pluggable
allocator allocates them. A two-layer model trains with an Adam-like optimizer: every block's
category and every phase's peak are known in advance, so the record is checked byte for byte
(tags add up to allocated; parameters, buffers, gradients, optimizer state, activations,
temporaries, inputs at each phase's peak), then a kept-outputs leak is flagged by step 3 with
this file's line, and no leak in the clean steps before it.
The record, written as run --categories writes it, is drawn by `vram viz`.
Usage: test_vram_torch_categories_cpu.py LIBVRAM_TORCH FAKE_LIBCUDA VRAM_EXE
"""
import ctypes
import os
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, HERE)
from pycheck import check, done, plugin_over_fake_driver  # noqa: E402

lib_path, fake, vram_exe = plugin_over_fake_driver(devices=1, extra=["VRAM_EXE"])
lib = ctypes.CDLL(lib_path)
lib.vram_torch_alloc.restype, lib.vram_torch_alloc.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t, ctypes.c_int,
                                                                                ctypes.c_void_p]
lib.vram_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]


# --- the stand-in torch ---------------------------------------------------------------------
class Handle:
    def __init__(self, table, item):
        self.table, self.item = table, item

    def remove(self):
        if self.item in self.table:
            self.table.remove(self.item)


class Storage:
    def __init__(self, ptr, nbytes):
        self.ptr, self.size = ptr, nbytes

    def data_ptr(self):
        return self.ptr

    def nbytes(self):
        return self.size


class Tensor:
    """A CUDA tensor of `nbytes` bytes, allocated through the plug-in; freed when collected."""

    def __init__(self, nbytes):
        self.nbytes, self.ptr = nbytes, lib.vram_torch_alloc(nbytes, 0, None)
        self.is_cuda, self.device, self.grad, self.requires_grad = True, types.SimpleNamespace(index=0), None, False
        self.hooks = []

    def untyped_storage(self):
        return Storage(self.ptr, self.nbytes)

    def numel(self):
        return self.nbytes

    def element_size(self):
        return 1

    def __del__(self):
        lib.vram_torch_free(self.ptr, self.nbytes, 0, None)

    def register_post_accumulate_grad_hook(self, fn):
        self.hooks.append(fn)
        return Handle(self.hooks, fn)


class Parameter(Tensor):
    def __init__(self, nbytes):
        super().__init__(nbytes)
        self.requires_grad = True


pre_hooks, post_hooks, step_pre, step_post, saved_hooks = [], [], [], [], []


class Module:
    def __init__(self):
        self.params, self.bufs, self.children = [], [], []

    def parameters(self, recurse=True):
        return [p for m in (self.modules() if recurse else [self]) for p in m.params]

    def buffers(self):
        return [b for m in self.modules() for b in m.bufs]

    def modules(self):
        out = [self]
        for c in self.children:
            out += c.modules()
        return out

    def __call__(self, x):
        for h in list(pre_hooks):
            h(self, (x,))
        out = self.forward(x)
        for h in list(post_hooks):
            h(self, (x,), out)
        return out


class Layer(Module):
    """out = f(x); saves its output for backward; a temporary workspace meanwhile."""

    def __init__(self, wbytes, obytes):
        super().__init__()
        self.params = [Parameter(wbytes)]
        self.obytes, self.saved = obytes, []

    def forward(self, x):
        work = Tensor(self.obytes // 2)  # a temporary, freed before the layer returns
        out = Tensor(self.obytes)
        out.grad_fn = "made by an operation"
        self.saved.append(saved_hooks[-1][0](out) if saved_hooks else out)
        del work
        return out


class Net(Module):
    def __init__(self):
        super().__init__()
        self.children = [Layer(1 << 20, 1 << 16), Layer(1 << 18, 1 << 14)]
        self.bufs = [Tensor(4096)]

    def forward(self, x):
        return self.children[1](self.children[0](x))


def fake_backward(tensors, *args, **kwargs):
    """Frees what the layers saved and accumulates a gradient into each parameter."""
    for layer in net.children:
        layer.saved.clear()
        for p in layer.params:
            if p.grad is None:
                p.grad = Tensor(p.nbytes)
            for h in p.hooks:
                h(p)


class Optimizer:
    def __init__(self, params, defaults):
        self.param_groups, self.state, self.defaults = [dict(defaults, params=list(params))], {}, defaults


class Adam(Optimizer):
    def __init__(self, params):
        super().__init__(params, {"lr": 1e-3, "amsgrad": False})

    def step(self):
        for h in list(step_pre):
            h(self, (), {})
        for p in self.param_groups[0]["params"]:
            if p not in self.state:
                self.state[p] = {"exp_avg": Tensor(p.nbytes), "exp_avg_sq": Tensor(p.nbytes), "step": 0.0}
        tmp = Tensor(1 << 12)  # noqa: F841  (the step's temporary)
        del tmp
        for h in list(step_post):
            h(self, (), {})

    def zero_grad(self):
        for p in self.param_groups[0]["params"]:
            p.grad = None


def register(table):
    def reg(fn):
        table.append(fn)
        return Handle(table, fn)
    return reg


torch = types.ModuleType("torch")
torch.Tensor = Tensor
torch.compiler = types.SimpleNamespace(is_compiling=lambda: False)
torch.autograd = types.SimpleNamespace(backward=fake_backward)
torch._C = types.SimpleNamespace(_autograd=types.SimpleNamespace(
    _push_saved_tensors_default_hooks=lambda pack, unpack: saved_hooks.append((pack, unpack)),
    _pop_saved_tensors_default_hooks=lambda: saved_hooks.pop()))
torch.cuda = types.SimpleNamespace(is_initialized=lambda: True, current_device=lambda: 0, device_count=lambda: 1)
nn_module = types.ModuleType("torch.nn.modules.module")
nn_module.register_module_forward_pre_hook = register(pre_hooks)
nn_module.register_module_forward_hook = register(post_hooks)
optim_module = types.ModuleType("torch.optim.optimizer")
optim_module.register_optimizer_step_pre_hook = register(step_pre)
optim_module.register_optimizer_step_post_hook = register(step_post)
optim = types.ModuleType("torch.optim")
optim.Optimizer = Optimizer
for name, mod in (("torch", torch), ("torch.nn", types.ModuleType("torch.nn")),
                  ("torch.nn.modules", types.ModuleType("torch.nn.modules")), ("torch.nn.modules.module", nn_module),
                  ("torch.optim", optim), ("torch.optim.optimizer", optim_module)):
    sys.modules[name] = mod
sys.modules["torch.nn"].modules = sys.modules["torch.nn.modules"]
sys.modules["torch.nn.modules"].module = nn_module
sys.modules["torch.optim"].optimizer = optim_module

import vram_torch  # noqa: E402
from vram_torch import tracker as cat  # noqa: E402
from vram_torch import category_report as cr  # noqa: E402

vram_torch._enabled = True  # (the stand-in has no CUDAPluggableAllocator to swap: the plug-in is driven directly)
net = Net()  # before the tracker: its parameters are "other" until the first forward shows them
opt = Adam(net.parameters())
tracker = cat.start(torch, vram_torch, leaks=True, program=["stand-in"])
check(saved_hooks and pre_hooks and step_pre and step_post and torch.autograd.backward is not fake_backward,
      "the tracker installed its hooks and wrapped backward")

KiB = 1024
P = (1 << 20) + (1 << 18)  # parameter bytes
kept = []
for step in range(5):
    x = Tensor(8 * KiB)  # an input, made outside the phases: "other"
    opt.zero_grad()
    out = net(x)
    torch.autograd.backward(out)
    opt.step()
    if step >= 2:
        kept.append(out)  # the planted leak: outputs kept from the third step on
    st = vram_torch.memory_stats()
    tags = {t: st.get("tags.%s.requested_bytes.current" % t, 0) for t in
            ("parameter", "gradient", "optimizer_state", "buffer", "activation", "temporary", "other")}
    check(tags["parameter"] == P and tags["gradient"] == P and tags["optimizer_state"] == 2 * P
          and tags["buffer"] == 4096, "step %d: parameters, gradients, optimizer state, buffers: %s" % (step + 1, tags))
    total = sum(st.get("tags.%s.allocated_bytes.current" % t, 0) for t in cat._BUILTIN_KEYS)
    check(total == st["allocated_bytes.all.current"], "step %d: the tags add up to allocated" % (step + 1))
    if step <= 2:
        check(not vram_torch.leaks(), "step %d: no leak in steady training" % (step + 1))
    del out, x

rec = vram_torch.categories()
check(len(rec["steps"]) == 5 and not cr.check_sums(rec), "five steps, sums exact: %s" % cr.check_sums(rec)[:2])
s2 = rec["steps"][1]["phases"]
check(sorted(s2) == ["backward", "forward", "optimizer", "other"], "phases of step 2: %s" % sorted(s2))
fw = s2["forward"]["at_peak_allocated"]
# forward's peak: the first layer's output made beside its workspace (64 + 32 KiB, both temporaries
# until the output is saved), the input; the optimizer state of step 1; no gradients (zeroed)
check(fw["parameters"] == P and fw["optimizer_state"] == 2 * P and fw["gradients"] == 0 and fw["buffers"] == 4096,
      "forward peak: the fixed categories %s" % fw)
check(fw["activations"] == 0 and fw["temporaries"] == 96 * KiB and fw["other"] == 8 * KiB,
      "forward peak: 96 KiB of temporaries, the 8 KiB input: %s" % fw)
check(s2["forward"]["own_peak"]["activations"] == 80 * KiB, "forward: both saved outputs are activations: %s"
      % s2["forward"]["own_peak"])
bw = s2["backward"]["own_peak"]
check(bw["gradients"] == P and bw["activations"] == (1 << 16) + (1 << 14), "backward: gradients made, activations held: %s"
      % bw)
op = s2["optimizer"]["at_peak_allocated"]
check(op["temporaries"] == 4096 and op["optimizer_state"] == 2 * P, "optimizer: its temporary: %s" % op)
s1 = rec["steps"][0]["phases"]["optimizer"]["own_peak"]
check(s1["temporaries"] >= 2 * P, "step 1: the new state is a temporary until the step ends: %s" % s1)
check(rec["run"]["peak_reserved"] >= rec["run"]["peak_allocated"] > 0 and 0 <= rec["run"]["fragmentation"] < 1,
      "the run's peaks and fragmentation")
table = cr.format_table(rec)
check("params" in table and "activ" in table and table.count("\n") >= 20, "the table:\n" + table)

with tempfile.TemporaryDirectory() as d:  # the JSON run --categories writes, drawn by vram viz
    cr.write_json(rec, os.path.join(d, "c.json"))
    p = subprocess.run([vram_exe, "viz", os.path.join(d, "c.json"), "-o", os.path.join(d, "c.html")],
                       capture_output=True, text=True)
    check(p.returncode == 0 and os.path.getsize(os.path.join(d, "c.html")) > 0, "vram viz draws it: %s" % p.stderr)

leaks = vram_torch.leaks()
with open(__file__) as f:
    line = [i for i, text in enumerate(f, 1) if text.strip() == "out = net(x)"][0]
check(len(leaks) >= 1 and leaks[0]["category"] == "activations" and leaks[0]["first_step"] == 5,
      "the kept outputs: flagged at step 5, two steps after the leak began: %s" % leaks)
check(any(os.path.basename(fr[0]) == os.path.basename(__file__) and fr[1] == line for g in leaks for fr in g["stack"]),
      "with the line that allocated them (%d): %s" % (line, [g["where"] for g in leaks]))
check(leaks[0]["where"].startswith("test_vram_torch_categories_cpu.py:"), "named: %s" % leaks[0]["where"])

n = len(vram_torch.categories()["steps"])
vram_torch.mark_step()
check(len(vram_torch.categories()["steps"]) == n + 1, "mark_step ends a step by hand")
cat.stop()
check(torch.autograd.backward is fake_backward and not saved_hooks and not pre_hooks and not step_post
      and not hasattr(Optimizer.__init__, "__wrapped__"), "stop() takes every hook away")

# --- an out-of-memory in step 1's forward: explain_oom estimates the step -----------------------
# The optimizer is known from its construction (no step has run), the forward's progress by the
# calls of modules with parameters, and its largest saved tensor; the plug-in's out-of-memory
# observer is called as it would be at a failing allocation inside a layer.
opt.state.clear()  # (the first run's optimizer state and kept outputs go)
kept.clear()
tracker = cat.start(torch, vram_torch, program=["stand-in"])
net = Net()
opt2 = Adam(net.parameters())
check(opt2 in tracker.optimizers and opt not in tracker.optimizers, "an optimizer made while tracking is known at once")
real_forward = [layer.forward for layer in net.children]


def failing(size):
    def forward(x):
        tracker._on_oom(0, size, 1 << 30, 0)
        raise MemoryError("out of memory")
    return forward


for fail_in, progress, rest in ((0, 0.5, [1, 0.0]), (1, 1.0, [0, float(1 << 16)])):
    net.children[fail_in].forward = failing(3 << 16)
    x = Tensor(8 * KiB)
    try:
        net(x)
    except MemoryError:
        pass
    net.children[fail_in].forward = real_forward[fail_in]
    ex = vram_torch.explain_oom()
    f = ex["at_failure"]
    check(f["phase"] == "forward" and f["step"] == 1 and f["forward_progress"] == progress
          and f["forward_rest"] == rest and f["optimizer_info"] == [{"name": "Adam", "param_bytes": P, "momentum": False,
                                                                         "amsgrad": False, "centered": False}],
          "failing in layer %d: progress %s, the rest %s: %s" % (fail_in, progress, rest,
                                                                 {k: f.get(k) for k in ("forward_progress", "forward_rest",
                                                                                            "optimizer_info")}))
    c = f["categories"]
    # the rest of forward: modules still to run x bytes each as lately; the largest recent is the request,
    # backward's start 1.5 x it
    variable = c["activations"] + int(rest[0] * rest[1]) + c["temporaries"] + c["other"] + (3 << 16) + 3 * (3 << 16) // 2
    want = c["parameters"] + c["buffers"] + 2 * P + P + variable // 2
    check(ex["estimate"] and ex["remedies"][0]["peak_allocated"] == want and "optimizer state 2.50 MiB (Adam)" in
          "\n".join(ex["lines"]), "the step estimated: %d bytes halved, want %d: %s" % (
              ex["remedies"][0]["peak_allocated"], want, ex["lines"][3:4]))
    del x


class Chain(Module):
    """Its children called one after the other."""

    def __init__(self, children):
        super().__init__()
        self.children = children

    def forward(self, x):
        for m in self.children:
            x = m(x)
        return x


def fail_forward(net, index, x):
    """The figures explain_oom has after net's forward fails in its child `index`."""
    net.children[index].forward = failing(1 << 10)
    try:
        net(x)
    except MemoryError:
        pass
    return vram_torch.explain_oom()["at_failure"]


# failing in the sixth layer: two layers still to run, each taken to save what each of the last
# quarter of the five completed (the fourth and fifth: 8 and 4 KiB) saved: 6 KiB
# (eight layers whose outputs halve as they go, as a convolutional net's do)
f = fail_forward(Chain([Layer(4096, (64 * KiB) >> i) for i in range(8)]), 5, Tensor(KiB))
check(f["forward_rest"] == [2, 6.0 * KiB] and f["forward_progress"] == 6 / 8, "the rest of a shrinking forward at its "
      "recent rate: %s" % f["forward_rest"])


# --- a convolutional forward failing: the rest sized by its modules' shapes (forward_shapes.py) ---
class Image(Tensor):
    """An N x C x H x W output of one byte an element, made by an operation."""

    def __init__(self, shape):
        super().__init__(shape[0] * shape[1] * shape[2] * shape[3])
        self.shape, self.grad_fn = shape, "made by an operation"

    def dim(self):
        return 4


class Conv2d(Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.params = [Parameter(4096)]
        self.in_channels, self.out_channels, self.kernel_size = cin, cout, (1, 1)
        self.stride, self.padding, self.dilation = (stride, stride), (0, 0), (1, 1)

    def forward(self, x):  # saves nothing new (its input is the last output, saved already)
        n, _, h, w = x.shape
        return Image((n, self.out_channels, (h - 1) // self.stride[0] + 1, (w - 1) // self.stride[1] + 1))


class BatchNorm2d(Module):
    def __init__(self, channels):
        super().__init__()
        self.params, self.num_features = [Parameter(256)], channels

    def forward(self, x):  # saves its input and its output
        out = Image(x.shape)
        for t in (x, out):
            saved_hooks[-1][0](t)
        return out


# failing in the third convolution: it and the last norm still to run (64 x 4 x 4 a sample each at
# stride 2 from 8 x 8), at what the second norm saved per element of its output (its input and
# output: 2 bytes): 2 x (2048 + 2048)
cnn = Chain([Conv2d(8, 16, 1), BatchNorm2d(16), Conv2d(16, 32, 2), BatchNorm2d(32), Conv2d(32, 64, 2), BatchNorm2d(64)])
f = fail_forward(cnn, 4, Image((2, 8, 16, 16)))
check(f["forward_rest_shapes"] == [2, 2 * (2048 + 2048)], "the rest of a convolutional forward by its shapes: %s (the "
      "rate's guess %s)" % (f["forward_rest_shapes"], f["forward_rest"]))
cat.stop()
check(not post_hooks, "stop() takes the forward hook away")
sys.exit(done("test_vram_torch_categories_cpu"))
