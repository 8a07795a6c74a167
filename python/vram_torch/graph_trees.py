"""graph_trees.py — torch.compile's CUDA graph trees (mode="reduce-overhead") under vram.

Inductor's CUDA graph trees keep every graph of a compiled program in one private pool, and
besides capturing into it (which graphs.py already gives vram) they call PyTorch's allocator
directly through torch._C: they run a graph's warm-up and copy its inputs with the current
stream's allocations routed into the pool (_cuda_beginAllocateCurrentStreamToPool ...
_cuda_endAllocateCurrentStreamToPool, _cuda_releasePool), check that the pool's live blocks are
the tensors they believe alive (_cuda_checkPoolLiveAllocations, under Inductor's default
triton.slow_path_cudagraph_asserts), and save the pool's state after each recording
(_cuda_getCheckpointState). Under a pluggable allocator PyTorch makes the routing calls no-ops
(so the inputs a graph replays from would live in ordinary memory) and the others raise.
install(torch, vt) replaces those torch._C functions with vram's:

- begin routes the current stream's allocations to the pool in vram (vram_allocator_begin_pool
  and route_pool), end ends it, release ends one use of the pool, as PyTorch counts them
  (PyTorch 2.11 calls _cuda_beginAllocateCurrentThreadToPool, which routes every stream of the
  thread; the trees run warm-ups and copies on their own stream, the current one);
- the live check compares the pool's allocated blocks with the given addresses exactly, as
  PyTorch's does (vram_torch_graph_pool_live_equal);
- the checkpoint state is a token naming the pool. Restoring one (_cuda_setCheckpointPoolState:
  the trees need it when a function is compiled again, sees a new input shape, or runs in
  another mode after the tree has replayed, e.g. eval after training) would re-create blocks
  at their old addresses and hand them to tensors PyTorch rebuilds; vram does not do that yet,
  and the call raises a RuntimeError that says so and names the alternatives.

Names a PyTorch version lacks are skipped; the originals are kept in ORIGINALS.
"""

import ctypes

ORIGINALS = {}


class CheckpointState:
    """What _cuda_getCheckpointState returns under vram: the pool it was taken of."""

    def __init__(self, device, key):
        self.device, self.key = device, key

    def __repr__(self):
        return "vram_torch.graph_trees.CheckpointState(device=%d, pool=%s)" % (self.device, self.key)


def install(torch, vt):
    """Replaces the CUDA graph trees' torch._C pool functions with vram's (idempotent)."""
    c_module = getattr(torch, "_C", None)
    if ORIGINALS or c_module is None:
        return
    from .graphs import _key

    routed = {}  # device -> the pool keys routed on it, newest last (end without a pool ends the newest)

    def begin(device, pool):
        key = _key(pool)
        vt._graph_pool(0, key, device)
        stream = torch.cuda.current_stream(device).cuda_stream
        if vt._lib.vram_torch_graph_pool_stream(1, key[0], key[1], device, stream) != 0:
            error = vt._error("routing stream %#x of cuda:%d into CUDA graph pool %s" % (stream, device, key))
            vt._graph_pool(1, key, device)
            vt._graph_pool(2, key, device)
            raise error
        routed.setdefault(device, []).append(key)

    def end(device, pool=None):
        keys = routed.get(device, [])
        key = _key(pool) if pool is not None else (keys[-1] if keys else None)
        if key is None:
            raise RuntimeError("vram_torch: end of allocation to a CUDA graph pool on cuda:%d: none was begun" % device)
        if key in keys:
            keys.remove(key)
        vt._graph_pool(1, key, device)

    def release(device, pool):
        vt._graph_pool(2, _key(pool), device)

    def live_equal(device, pool, expected):
        key = _key(pool)
        ptrs = list({int(p) for p in expected})  # (the plug-in sorts them)
        array = (ctypes.c_ulonglong * max(1, len(ptrs)))(*ptrs)
        result = vt._lib.vram_torch_graph_pool_live_equal(key[0], key[1], device, array, len(ptrs))
        if result < 0:
            raise vt._error("live allocations of CUDA graph pool %s on cuda:%d" % (key, device))
        return bool(result)

    def get_checkpoint(device, pool):
        return CheckpointState(device, _key(pool))

    def set_checkpoint(device, state, *args, **kwargs):
        raise RuntimeError(
            "vram_torch: torch.compile's CUDA graph trees asked to restore the memory checkpoint of a "
            "graph pool (%r), which happens when a function compiled with mode=\"reduce-overhead\" is "
            "compiled again, sees a new input shape, or runs in another mode after its graphs have "
            "replayed; vram cannot restore one yet. Keep input shapes fixed (e.g. pad them), reset the "
            "trees before another compiled function runs (torch._dynamo.reset() and "
            "torch._inductor.cudagraph_trees.reset_cudagraph_trees()), compile with "
            "mode=\"max-autotune-no-cudagraphs\" or the default mode, or run without vram_torch."
            % (state,))

    replacements = {
        "_cuda_beginAllocateCurrentStreamToPool": begin,
        "_cuda_beginAllocateCurrentThreadToPool": begin,  # newer PyTorch: the thread's; its stream here
        "_cuda_endAllocateCurrentStreamToPool": end,
        "_cuda_endAllocateToPool": end,
        "_cuda_releasePool": release,
        "_cuda_checkPoolLiveAllocations": live_equal,
        "_cuda_getCheckpointState": get_checkpoint,
        "_cuda_setCheckpointPoolState": set_checkpoint,
    }
    for name, fn in replacements.items():
        if hasattr(c_module, name):
            ORIGINALS[name] = getattr(c_module, name)
            setattr(c_module, name, fn)
