"""tracker.py — memory by category for any PyTorch program under vram (vram_torch.track(), or
`python -m vram_torch run --categories`): parameters, buffers, gradients, optimizer state,
activations, temporaries and inputs/other, per step and per phase (category_report.py's record).

Every block carries one allocator tag, so the categories add up to the allocated bytes exactly.
The plug-in tags and keeps the peaks (src/torch/categories.cpp); the Tracker's hooks say what a
block is as PyTorch reveals it: new blocks are temporaries inside forward, backward and the
optimizer step, other outside; a module's parameters and buffers at its first call (global
forward pre-hook); .grad at accumulation (post-accumulate-grad hooks); saved tensors at saving
(a saved-tensors pack hook) and what is still a temporary when backward starts; the optimizer's
state after its step (global optimizer step hooks). Phases: forward from the first module call
after a step's start or after backward, backward = torch.autograd.backward, the optimizer phase
= Optimizer.step, whose end is the step boundary. The hooks do nothing while torch.compile
traces. One device: the current one when tracking starts. docs/torch_plan.md has the details.
"""
import ctypes
import sys
import threading
import weakref

from . import category_report as cr

MASK_ALL = 0xFFFFFFFF


def _bit(*names):
    m = 0
    for n in names:
        m |= 1 << cr.TAG[n]
    return m


UNKNOWN = _bit("other", "temporaries", "activations")


class Tracker:
    """The hooks and the record of one program. install() once; finish() closes the record."""

    def __init__(self, torch, vt, device=0, leaks=None, program=None):
        self.torch, self.vt, self.lib, self.device = torch, vt, vt._load(), device
        self.leaks = leaks  # a leaks.LeakFinder, fed at each step boundary
        self.program = list(program or [])
        self.phase, self.step = "other", 1
        self.steps, self.current = [], {}
        self.run = None
        self.params = weakref.WeakValueDictionary()  # id -> parameter seen (for .grad re-tags)
        self.seen = weakref.WeakSet()
        self.optimizers = weakref.WeakSet()
        self.handles, self.lock, self.depth = [], threading.RLock(), 0
        self.oom = None  # what explain_oom needs, taken at the failing allocation
        # how far forward has come, for explain_oom: calls of modules with parameters of their own
        # in this forward and in the last whole one, the outermost module called; and what this
        # forward saved for backward (made by an operation, each storage once): its bytes, their
        # running total at each such call (the recent rate), the largest since the last such call
        self.calls, self.full_calls, self.root, self.restart = 0, 0, None, False
        self.weighted = weakref.WeakSet()  # modules seen with parameters of their own
        self._forward_start()
        self.notes = []
        self.buf = (ctypes.c_longlong * cr.WINDOW_SIZE)()
        self._setup_lib()

    def _setup_lib(self):
        lib = self.lib
        for name, res, args in (("vram_torch_categories_error", ctypes.c_char_p, []),
                                ("vram_torch_set_default_tag", ctypes.c_int, [ctypes.c_int]),
                                ("vram_torch_retag", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint,
                                                                    ctypes.c_int]),
                                ("vram_torch_retag_all", ctypes.c_longlong, [ctypes.c_int, ctypes.c_int, ctypes.c_int]),
                                ("vram_torch_set_windows", None, [ctypes.c_int]),
                                ("vram_torch_window", ctypes.c_int, [ctypes.c_int, ctypes.c_int,
                                                                     ctypes.POINTER(ctypes.c_longlong), ctypes.c_size_t])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        if lib.vram_torch_window(0, 0, None, 0) != cr.WINDOW_SIZE:
            raise RuntimeError("vram_torch: the library's category window is not this package's layout; rebuild")

    # --- tagging ---------------------------------------------------------------------------
    def retag(self, tensor, name, mask=MASK_ALL):
        """Tags the block of tensor's storage as `name` where its tag is one of `mask`. Never
        raises: it runs inside the program's hooks (a meta, sparse or fake tensor has no block)."""
        try:
            if not tensor.is_cuda:
                return
            ptr = tensor.untyped_storage().data_ptr()
            if ptr:
                self.lib.vram_torch_retag(ctypes.c_void_p(ptr), tensor.device.index or 0, mask, cr.TAG[name])
        except Exception:
            return

    def _module_seen(self, module):
        if module in self.seen:
            return
        self.seen.add(module)
        try:
            if any(True for _ in module.parameters(recurse=False)):
                self.weighted.add(module)
        except Exception:  # (a module of another shape: not counted in forward's progress)
            pass
        for p in module.parameters():
            self.retag(p, "parameters", MASK_ALL & ~_bit("parameters"))
            if p.requires_grad and id(p) not in self.params:
                self.params[id(p)] = p
                try:  # (PyTorch 2.1 and later; leaves only)
                    self.handles.append(p.register_post_accumulate_grad_hook(self._grad_hook))
                except (AttributeError, RuntimeError):
                    pass
        for b in module.buffers():
            self.retag(b, "buffers", UNKNOWN)

    def _forward_start(self):
        self.calls, self.saved_ptrs, self.saved_total, self.marks, self.largest_recent = 0, set(), 0, [], 0
        # for the rest of a convolutional forward (forward_shapes.py): the modules with parameters
        # called, in order; each one's output elements; the last spatial size of each channel count
        self.called, self.out_numel, self.spatial, self.batch = [], {}, {}, 0

    def _output_seen(self, module, output):
        """A module's output (a global forward hook): its size, for the rest of forward. Never
        raises (a hook)."""
        try:
            if self.phase != "forward" or not isinstance(output, self.torch.Tensor):
                return
            if output.dim() == 4:
                self.spatial[int(output.shape[1])] = (int(output.shape[2]), int(output.shape[3]))
                self.batch = int(output.shape[0])
            if module in self.weighted:
                self.out_numel[id(module)] = output.numel()
        except Exception:
            pass

    def _saved(self, t):
        """Counts a tensor forward saves for backward, if an operation made it (parameters and
        inputs are saved too, but are not activations). Never raises (a hook)."""
        try:
            if getattr(t, "grad_fn", None) is None:
                return
            st = t.untyped_storage()
            if st.data_ptr() in self.saved_ptrs:
                return
            self.saved_ptrs.add(st.data_ptr())
            self.saved_total += st.nbytes()
            self.largest_recent = max(self.largest_recent, st.nbytes())
        except Exception:  # (a tensor with no storage: nothing to weigh)
            pass

    def _grad_hook(self, p):
        if p.grad is not None:
            self.retag(p.grad, "gradients", UNKNOWN)

    def _grads(self):
        for p in list(self.params.values()):
            if p.grad is not None:
                self.retag(p.grad, "gradients", UNKNOWN)

    # --- phases ----------------------------------------------------------------------------
    def _enter(self, phase):
        with self.lock:
            if phase == self.phase:
                return
            self._close_phase()
            self.phase = phase
            tag = "other" if phase == "other" else "temporaries"
            self.lib.vram_torch_set_default_tag(cr.TAG[tag])

    def _read(self, reset):
        if self.lib.vram_torch_window(self.device, 1 if reset else 0, self.buf, cr.WINDOW_SIZE) < 0:
            raise RuntimeError("vram_torch: window: %s" % self.lib.vram_torch_categories_error().decode(errors="replace"))
        return list(self.buf)

    def _close_phase(self):
        w = cr.window_record(self._read(True))
        self.current[self.phase] = cr.merge(self.current.get(self.phase), w)
        self.run = cr.merge(self.run, w)

    def end_step(self):
        """A step boundary: the step's record closes (also vram_torch.mark_step(), for programs
        without an optimizer step)."""
        with self.lock:
            self._close_phase()
            now = cr.now_record(self._read(False))
            self.steps.append({"step": self.step, "phases": self.current, "end": now})
            if self.leaks is not None:
                self.leaks.observe(self.step, self._live_blocks())
            self.step += 1
            self.current = {}
            self.phase = "other"
            self.lib.vram_torch_set_default_tag(cr.TAG["other"])

    def _live_blocks(self):
        snap = self.vt.snapshot(self.device)
        names = snap.get("tag_names", [])
        out = []
        for seg in snap["segments"]:
            for b in seg["blocks"]:
                if b["state"] != "active_allocated":
                    continue
                tag = b.get("tag", "other")
                if isinstance(tag, int):
                    tag = names[tag] if tag < len(names) else str(tag)
                out.append({"address": b["address"], "size": b["size"], "category": _category_of(tag),
                            "frames": [(f.get("filename", "?"), f.get("line", 0), f.get("name", "?"))
                                       for f in b.get("frames", [])]})
        return out

    # --- hooks -----------------------------------------------------------------------------
    def install(self):
        torch = self.torch
        compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
        self.lib.vram_torch_set_windows(1)
        self._read(True)

        def pre_forward(module, args):
            if compiling():
                return None
            if self.phase in ("other", "optimizer") or self.restart:  # (an OOM ended the last forward)
                self._enter("forward")
                self.root, self.restart = module, False
                self._forward_start()
            self._module_seen(module)
            if self.phase == "forward" and module in self.weighted:
                self.calls += 1
                self.marks.append(self.saved_total)
                self.called.append(module)
                self.largest_recent = 0
            return None
        from torch.nn.modules import module as nn_module
        self.handles.append(nn_module.register_module_forward_pre_hook(pre_forward))
        if hasattr(nn_module, "register_module_forward_hook"):
            self.handles.append(nn_module.register_module_forward_hook(
                lambda module, args, output: None if compiling() else self._output_seen(module, output)))

        def pack(t):
            if not compiling() and self.phase == "forward":
                self.retag(t, "activations", _bit("temporaries"))
                self._saved(t)
            return t
        try:
            torch._C._autograd._push_saved_tensors_default_hooks(pack, lambda t: t)
            self.pushed_hooks = True
        except (AttributeError, RuntimeError) as e:
            self.pushed_hooks = False
            self.notes.append("no saved-tensors hook (%s): activations are what backward finds alive" % e)

        original = torch.autograd.backward

        def backward(*args, **kwargs):
            self.depth += 1  # (a reentrant checkpoint calls backward inside backward)
            if self.depth == 1:
                self.full_calls = self.calls if self.phase == "forward" else self.full_calls
                self._enter("backward")
                # what forward made and is still alive is what the graph holds
                self.lib.vram_torch_retag_all(self.device, cr.TAG["temporaries"], cr.TAG["activations"])
            try:
                return original(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self._grads()
                    self._enter("other")
        backward.__wrapped__ = original
        torch.autograd.backward = backward
        self.original_backward = original

        def pre_step(opt, args, kwargs):
            self.optimizers.add(opt)
            self._enter("optimizer")

        def post_step(opt, args, kwargs):
            for group in opt.param_groups:
                for p in group["params"]:
                    self.retag(p, "parameters", MASK_ALL & ~_bit("parameters"))
                    if p.grad is not None:
                        self.retag(p.grad, "gradients", UNKNOWN)
            for state in opt.state.values():
                for v in (state.values() if isinstance(state, dict) else ()):
                    if isinstance(v, torch.Tensor):
                        self.retag(v, "optimizer_state", UNKNOWN)
            self.end_step()
        from torch.optim import optimizer as optim_module
        self.handles.append(optim_module.register_optimizer_step_pre_hook(pre_step))
        self.handles.append(optim_module.register_optimizer_step_post_hook(post_step))
        self._watch_optimizers()
        self.vt.attach_out_of_memory_observer(self._on_oom)

    def _watch_optimizers(self):
        """Optimizers made while tracking are known from their construction (Optimizer.__init__
        wrapped), so that a failure before the first step knows the state they will make."""
        try:
            from torch.optim import Optimizer as cls
        except ImportError:  # (a torch without it: optimizers are known at their first step)
            return
        original, optimizers = cls.__init__, self.optimizers

        def init(opt, *args, **kwargs):
            original(opt, *args, **kwargs)
            optimizers.add(opt)
        init.__wrapped__ = original
        cls.__init__ = init
        self.original_optimizer_init = (cls, original)

    def _on_oom(self, device, alloc, limit, free):
        if device != self.device:
            return
        st = self.vt.memory_stats(device)
        cats = {}
        for i, name in enumerate(cr.TAGS):
            key = "tags.%s.allocated_bytes.current" % _tag_key(i)
            cats[name] = st.get(key, 0)
        self.oom = {"step": self.step, "phase": self.phase, "request": int(alloc), "limit": int(limit),
                    "allocated": st.get("allocated_bytes.all.current", 0),
                    "reserved": st.get("reserved_bytes.all.current", 0), "categories": cats,
                    "trainable_bytes": sum(p.numel() * p.element_size() for p in self.params.values()),
                    "optimizers": sorted({type(o).__name__ for o in self.optimizers}),
                    "optimizer_info": [info for info in map(_optimizer_info, list(self.optimizers)) if info],
                    "largest_recent": self.largest_recent,
                    "forward_progress": self._forward_progress(), "forward_rest": self._forward_rest(),
                    "forward_rest_shapes": self._forward_rest_shapes(),
                    "last_step": self.steps[-1] if self.steps else None}
        self.restart = self.phase == "forward"  # the error unwinds forward: the next module call starts anew

    def _forward_rest(self):
        """(modules with parameters still to run in this forward, bytes saved per such module over
        the last quarter of those completed): the rest of forward as it has lately gone; None
        outside forward or where not known. (The module running when it failed is not done: the
        first one's partial figure stands for the rate until one completes.)"""
        if self.phase != "forward" or not self.marks:
            return None
        full = self.full_calls or self._weighted_count()
        k = len(self.marks)
        done = k - 1
        if not done:
            return [max(0, full - k), float(self.saved_total)]
        recent = max(1, (done + 3) // 4)
        return [max(0, full - k), (self.marks[done] - self.marks[done - recent]) / recent]

    def _forward_rest_shapes(self):
        """(modules with parameters still to run, the bytes they will save): their outputs' sizes
        from their shapes (forward_shapes.py) times the bytes saved per output element by the last
        quarter of those completed; None outside forward, or where a module or a size is not
        known (then the recent rate stands)."""
        if self.phase != "forward" or len(self.called) < 2 or self.root is None:
            return None
        try:
            from .forward_shapes import describe, rest_numel
            # still to run: no output seen (the one that failed too: the later ones' sizes follow from it)
            rest = [m for m in self.root.modules() if id(m) not in self.out_numel
                    and (m in self.weighted or any(True for _ in m.parameters(recurse=False)))]
            numels = rest_numel([describe(m) for m in rest], dict(self.spatial), self.batch)
            done = len(self.called) - 1
            recent = max(1, (done + 3) // 4)
            seen = [self.out_numel.get(id(m)) for m in self.called[done - recent:done]]
            if numels is None or None in seen or not sum(seen):
                return None
            per_element = (self.marks[done] - self.marks[done - recent]) / sum(seen)
            return [len(rest), int(per_element * sum(numels))]
        except Exception:
            return None

    def _weighted_count(self):
        try:
            return sum(1 for m in self.root.modules() if any(True for _ in m.parameters(recurse=False)))
        except Exception:
            return 0

    def _forward_progress(self):
        """The part of forward done when it failed, by calls of modules with parameters of their
        own (containers and parameterless modules need not be called, or are called more than
        once): against the last whole forward's, or else the outermost module's count of such
        modules; 1.0 outside forward."""
        if self.phase != "forward":
            return 1.0
        full = self.full_calls
        if not full and self.root is not None:
            full = self._weighted_count()
        return min(1.0, self.calls / full) if full else 1.0

    def uninstall(self):
        for h in self.handles:
            try:
                h.remove()
            except Exception:
                pass
        self.handles = []
        if getattr(self, "original_optimizer_init", None) is not None:
            cls, original = self.original_optimizer_init
            cls.__init__ = original
            self.original_optimizer_init = None
        if getattr(self, "original_backward", None) is not None:
            self.torch.autograd.backward = self.original_backward
            self.original_backward = None
        if getattr(self, "pushed_hooks", False):
            try:
                self.torch._C._autograd._pop_saved_tensors_default_hooks()
            except RuntimeError:
                pass
            self.pushed_hooks = False
        self.lib.vram_torch_set_default_tag(cr.TAG["other"])

    def record(self):
        """The record so far (the open step, if it has anything, as an incomplete last step)."""
        with self.lock:
            self._close_phase()
            steps = list(self.steps)
            if not self.steps or set(self.current) - {"other"}:  # (a tail of "other" alone is no step)
                steps.append({"step": self.step, "incomplete": True, "phases": dict(self.current),
                              "end": cr.now_record(self._read(False))})
            notes = list(self.notes)
            if not self.steps:
                notes.append("no optimizer step was seen: the program is one stretch (vram_torch.mark_step() "
                             "marks steps)")
            return {"format": cr.FORMAT, "device": self.device, "program": self.program,
                    "categories": cr.SHOWN, "steps": steps, "run": self.run, "notes": notes}


def _optimizer_info(opt):
    """What an optimizer's state will weigh: its class, the bytes of its distinct trainable
    parameters, and the settings that add state (oom_explain.state_bytes); None if unreadable."""
    try:
        seen, total = set(), 0
        for group in opt.param_groups:
            for p in group["params"]:
                if id(p) not in seen and getattr(p, "requires_grad", True):
                    seen.add(id(p))
                    total += p.numel() * p.element_size()
        group = opt.param_groups[0] if opt.param_groups else {}
        return {"name": type(opt).__name__, "param_bytes": total,
                "momentum": bool(group.get("momentum", 0)), "amsgrad": bool(group.get("amsgrad", False)),
                "centered": bool(group.get("centered", False))}
    except Exception:  # (an optimizer of another shape: the names alone are used)
        return None


_BUILTIN_KEYS = ["other", "parameter", "gradient", "optimizer_state", "activation", "temporary", "kv_cache", "buffer"]


def _tag_key(i):
    """The allocator's name of tag i, as memory_stats() and snapshots name it."""
    return _BUILTIN_KEYS[i]


def _category_of(tag_name):
    return cr.TAGS[_BUILTIN_KEYS.index(tag_name)] if tag_name in _BUILTIN_KEYS else tag_name


_tracker = None


def start(torch, vt, leaks=False, program=None):
    """Starts the tracker (once); with leaks, the leak finder too, with Python stacks kept for
    the live blocks."""
    global _tracker
    if _tracker is not None:
        return _tracker
    device = torch.cuda.current_device() if torch.cuda.is_initialized() else 0
    finder = None
    if leaks:
        from .leak_finder import LeakFinder
        vt.record_memory_history("all", max_entries=1, context="state")
        finder = LeakFinder()
    _tracker = Tracker(torch, vt, device, finder, program)
    _tracker.install()
    return _tracker


def current():
    return _tracker


def stop():
    global _tracker
    if _tracker is not None:
        _tracker.uninstall()
        _tracker.lib.vram_torch_set_windows(0)
        _tracker = None


if __name__ == "__main__":
    sys.exit("tracker.py is a module of vram_torch: python -m vram_torch run --categories train.py")
