"""graphs.py — CUDA graphs under vram: each graph's memory stays its own, as under PyTorch's allocator.

A captured graph replays the addresses its capture allocated. PyTorch's own allocator therefore
gives each capture a private memory pool: blocks allocated during the capture, once freed (the
graph's temporaries, or its outputs when the program drops them), are not handed to anything else
until the graph is reset or destroyed. PyTorch tells a pluggable allocator nothing of captures
(its beginAllocateToPool / endAllocateToPool / releasePool are no-ops there), so without this
module a graph's temporaries would serve later tensors, and every replay would overwrite them; an
empty_cache() could even unmap memory a replay writes to.

install(torch, vt) wraps torch.cuda.CUDAGraph's capture_begin, capture_end and reset (which
torch.cuda.graph and make_graphed_callables use) so that vram keeps a private pool per capture:
vram_allocator_begin_pool / bind_pool / end_pool / release_pool through the plug-in. A capture without a pool
gets a fresh one (torch.cuda.graph_pool_handle(), what PyTorch would make); graphs given the same
pool share it, and it lives until the last of them is reset or garbage-collected (a weakref
finalizer per capture).

Captures may run at once (in several threads, with capture_error_mode "thread_local" or
"relaxed"; up to 8 a device): once PyTorch has begun capturing, capture_begin names the capture to
vram by its stream (vram_allocator_bind_pool), and each allocation goes to the pool of the capture
its stream records, as PyTorch's own allocator routes them. A ninth capture_begin raises before
PyTorch starts capturing. Where the driver cannot name captures (no cuStreamGetCaptureInfo) a
warning says so, and the newest capture takes the allocations of every capturing stream.
"""
import warnings
import weakref

from . import graph_trees


def _key(pool):
    """(first, second) of a PyTorch graph pool id: a handle tuple or a torch.cuda.MemPool."""
    pid = getattr(pool, "id", pool)
    first, second = tuple(pid)
    return int(first) & (2**64 - 1), int(second) & (2**64 - 1)


def install(torch, vt):
    """Wraps torch.cuda.CUDAGraph's capture methods (idempotent; nothing to do without it)."""
    graph_cls = getattr(torch.cuda, "CUDAGraph", None)
    if graph_cls is None or getattr(graph_cls, "_vram_pools", False):
        return
    begin, end, reset = graph_cls.capture_begin, graph_cls.capture_end, graph_cls.reset

    def capture_begin(self, pool=None, *args, **kwargs):
        graph_trees.sweep()  # blocks of CUDA graph trees' outputs that died (graph_trees.py)
        if pool is None:
            pool = torch.cuda.graph_pool_handle()
        key, device = _key(pool), torch.cuda.current_device()
        vt._graph_pool(0, key, device)  # before PyTorch captures: a refusal leaves nothing half begun
        try:
            begin(self, pool, *args, **kwargs)
        except BaseException:
            vt._graph_pool(1, key, device)
            vt._graph_pool(2, key, device)
            raise
        self._vram_pool = (key, device)
        self._vram_release = weakref.finalize(self, vt._graph_pool_release_quietly, key, device)
        problem = vt._graph_pool_bind(key, device, torch.cuda.current_stream().cuda_stream)
        if problem:
            warnings.warn("vram_torch: concurrent CUDA graph captures cannot be told apart: %s" % problem,
                          RuntimeWarning, stacklevel=2)

    def capture_end(self, *args, **kwargs):
        try:
            return end(self, *args, **kwargs)
        finally:
            key, device = getattr(self, "_vram_pool", (None, None))
            if key is not None:
                vt._graph_pool(1, key, device)

    def reset_graph(self, *args, **kwargs):
        graph_trees.sweep()
        result = reset(self, *args, **kwargs)
        release = getattr(self, "_vram_release", None)
        if release is not None:
            release()  # a finalizer runs once: reset then destruction releases the pool once
        return result

    graph_cls.capture_begin, graph_cls.capture_end, graph_cls.reset = capture_begin, capture_end, reset_graph
    graph_cls._vram_pools = True
