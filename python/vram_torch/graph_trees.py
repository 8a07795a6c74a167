"""graph_trees.py — torch.compile's CUDA graph trees (mode="reduce-overhead") under vram.

Inductor's CUDA graph trees keep every graph of a compiled program in one private pool, and
besides capturing into it (which graphs.py already gives vram) they call PyTorch's allocator
directly through torch._C: they run a graph's warm-up and copy its inputs with the current
stream's allocations routed into the pool (_cuda_beginAllocateCurrentStreamToPool ...
_cuda_endAllocateCurrentStreamToPool, _cuda_releasePool), check that the pool's live blocks are
the tensors they believe alive (_cuda_checkPoolLiveAllocations, under Inductor's default
triton.slow_path_cudagraph_asserts), save the pool's state after each recording
(_cuda_getCheckpointState) and restore it (_cuda_setCheckpointPoolState) before they warm up or
record again after their graphs have replayed: a second compiled function, a new input shape, a
recompile, eval after training. Under a pluggable allocator PyTorch makes the routing calls
no-ops (so the inputs a graph replays from would live in ordinary memory) and the others raise.
install(torch, vt) replaces those torch._C functions with vram's:

- begin routes the current stream's allocations to the pool in vram (vram_allocator_begin_pool
  and route_pool), end ends it, release ends one use of the pool, as PyTorch counts them
  (PyTorch 2.11 calls _cuda_beginAllocateCurrentThreadToPool, which routes every stream of the
  thread; the trees run warm-ups and copies on their own stream, the current one);
- the live check compares the pool's allocated blocks with the given addresses exactly, as
  PyTorch's does (vram_torch_graph_pool_live_equal);
- a checkpoint is the list of the pool's allocated blocks (vram_allocator_pool_blocks).

Restoring one. The replays wrote their outputs into blocks that the allocator saw freed (the
tensors of the recording died), and PyTorch rebuilt those outputs as tensors that own nothing.
PyTorch's restore frees the pool's blocks, carves the checkpoint's again at their addresses and
swaps an owning deleter into each live output's storage (C++ only), then the trees free the
blocks of outputs that died (_cuda_cudaCachingAllocator_raw_delete). vram carves the blocks of
the checkpoint that were freed back out of the pool's free memory (vram_allocator_pool_recreate,
which refuses, changing nothing, when the pool holds an allocated block the checkpoint lacks) but
cannot give a storage a deleter from Python, so it adopts them instead: it keeps a weak reference
to each live output's storage and frees the block once every storage on it has died, at the next
call the trees make (or vram_torch's statistics, empty_cache, a CUDA graph's capture or reset):
until then the block is the pool's, which serves nothing else while the tree lives, so holding it
a little longer costs no memory that could be used. (A tree reset while its outputs live leaves
their blocks allocated until they die and one of those calls comes.) The trees' other uses of
those storages go to vram too: raw_delete of a recreated block, _has_Standard_Deleter (true for
an adopted storage: it is freed as an owning one would be) and _free_And_Remove_DeleterFn (frees
the adopted block now).

Names a PyTorch version lacks are skipped; the originals are kept in ORIGINALS.
"""

import ctypes
import gc
import threading

ORIGINALS = {}
# What restores did, for tests and benchmarks: restores, blocks recreated, storages adopted, and
# recreated blocks freed by raw_delete, by their storages' death (found by a sweep) and by
# _free_And_Remove_DeleterFn.
COUNTS = dict.fromkeys(("restores", "recreated", "adopted", "freed_raw_delete", "freed_dead",
                        "freed_remove_deleter"), 0)
_recreated = {}  # install()'s blocks recreated by restores (address -> (device, adopting storages))
_lock = threading.RLock()  # over _recreated and the adoptions (sweeps come from any thread)
_sweep = None  # install()'s sweep of adopted blocks, for vram_torch's statistics and empty_cache


def sweep():
    """Frees the adopted blocks whose storages have all died (see the module's text)."""
    if _sweep is not None:
        _sweep()


def held():
    """The blocks restores recreated that are still allocated, after a sweep: (address, device,
    how many live storages adopt it). Empty once the trees and their outputs are gone."""
    sweep()
    with _lock:
        return sorted((ptr, device, len(impls)) for ptr, (device, impls) in _recreated.items())


class CheckpointState:
    """What _cuda_getCheckpointState returns under vram: the pool's allocated blocks, each
    (address, size, requested bytes, stream, tag)."""

    def __init__(self, device, key, blocks):
        self.device, self.key, self.blocks = device, key, blocks

    def __repr__(self):
        return "vram_torch.graph_trees.CheckpointState(device=%d, pool=%s, %d blocks)" % (
            self.device, self.key, len(self.blocks))


def install(torch, vt):
    """Replaces the CUDA graph trees' torch._C pool functions with vram's (idempotent)."""
    global _sweep
    c_module = getattr(torch, "_C", None)
    if ORIGINALS or c_module is None:
        return
    from .graphs import _key

    routed = {}  # device -> the pool keys routed on it, newest last (end without a pool ends the newest)
    # Blocks vram recreated: address -> (device, the StorageImpl addresses adopting it); those with
    # none are the outputs the trees free next (raw_delete). adopted: StorageImpl address ->
    # (block address, weak reference to the storage).
    recreated, adopted = _recreated, {}

    def vram_free(ptr):
        device, impls = recreated.pop(ptr)
        for impl in impls:
            del adopted[impl]
        vt._lib.vram_torch_free(ptr, 0, device, None)

    def sweep_now():
        with _lock:
            dead = [p for p, (_, impls) in recreated.items() if impls and all(adopted[i][1].expired() for i in impls)]
            for ptr in dead:
                vram_free(ptr)
            COUNTS["freed_dead"] += len(dead)

    _sweep = sweep_now

    def adopt(ptr, impl, storage):
        from torch.multiprocessing.reductions import StorageWeakRef
        if impl in adopted:
            return
        recreated[ptr][1].add(impl)
        adopted[impl] = (ptr, StorageWeakRef(storage))
        COUNTS["adopted"] += 1

    def begin(device, pool):
        sweep_now()
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
        sweep_now()
        vt._graph_pool(2, _key(pool), device)

    def live_equal_once(device, key, expected):
        ptrs = list({int(p) for p in expected})  # (the plug-in sorts them)
        array = (ctypes.c_ulonglong * max(1, len(ptrs)))(*ptrs)
        result = vt._lib.vram_torch_graph_pool_live_equal(key[0], key[1], device, array, len(ptrs))
        if result < 0:
            raise vt._error("live allocations of CUDA graph pool %s on cuda:%d" % (key, device))
        return bool(result)

    def live_equal(device, pool, expected):
        sweep_now()
        key = _key(pool)
        if live_equal_once(device, key, expected):
            return True
        gc.collect()  # a dead output not collected yet still holds its adopted block
        sweep_now()
        return live_equal_once(device, key, expected)

    def get_checkpoint(device, pool):
        sweep_now()
        key = _key(pool)
        n = ctypes.c_size_t(0)
        cap = 64
        while True:
            out = (ctypes.c_ulonglong * (5 * cap))()
            if vt._lib.vram_torch_graph_pool_blocks(key[0], key[1], device, out, cap, ctypes.byref(n)) != 0:
                raise vt._error("checkpoint of CUDA graph pool %s on cuda:%d" % (key, device))
            if n.value <= cap:
                break
            cap = n.value
        blocks = [tuple(out[5 * i:5 * i + 5]) for i in range(n.value)]
        return CheckpointState(device, key, blocks)

    def storage_of(storage_impl):
        """The live storage at a StorageImpl address the trees hold a weak reference to, or None."""
        return torch.UntypedStorage._new_with_weak_ptr(storage_impl)

    def set_checkpoint(device, state, stale_storages=(), storages_to_add_deleters_to=()):
        with _lock:
            restore(device, state, stale_storages, storages_to_add_deleters_to)

    def restore(device, state, stale_storages, storages_to_add_deleters_to):
        if not isinstance(state, CheckpointState):
            raise RuntimeError("vram_torch: _cuda_setCheckpointPoolState: %r is not a checkpoint vram took" % (state,))
        if state.device != device:
            raise RuntimeError("vram_torch: _cuda_setCheckpointPoolState on cuda:%d with a checkpoint of cuda:%d"
                               % (device, state.device))
        key = state.key
        # Stale storages give up their blocks, as PyTorch's restore takes their deleters.
        for impl in dict.fromkeys(int(s) for s in stale_storages):
            if impl in adopted:
                ptr = adopted.pop(impl)[0]
                recreated[ptr][1].discard(impl)
                if not recreated[ptr][1]:
                    vram_free(ptr)
            elif "_has_Standard_Deleter" in ORIGINALS and ORIGINALS["_has_Standard_Deleter"](impl):
                ORIGINALS["_free_And_Remove_DeleterFn"](impl)
        sweep_now()
        n = len(state.blocks)
        flat = (ctypes.c_ulonglong * max(1, 5 * n))(*[v for b in state.blocks for v in b])
        created = (ctypes.c_ubyte * max(1, n))()
        recreate = vt._lib.vram_torch_graph_pool_recreate
        if recreate(key[0], key[1], device, flat, n, created) != 0:
            gc.collect()  # outputs of an earlier path, dead but not collected, still hold adopted blocks
            sweep_now()
            if recreate(key[0], key[1], device, flat, n, created) != 0:
                raise vt._error("restoring the checkpoint of CUDA graph pool %s on cuda:%d" % (key, device))
        COUNTS["restores"] += 1
        for i in range(n):
            if created[i]:
                recreated[state.blocks[i][0]] = (device, set())
                COUNTS["recreated"] += 1
        for impl in dict.fromkeys(int(s) for s in storages_to_add_deleters_to):
            storage = storage_of(impl)
            if storage is not None and storage.data_ptr() in recreated:
                adopt(storage.data_ptr(), impl, storage)
            del storage

    def raw_delete(ptr):
        with _lock:
            ours = int(ptr) in recreated
            if ours:
                vram_free(int(ptr))
                COUNTS["freed_raw_delete"] += 1
        if not ours:
            ORIGINALS["_cuda_cudaCachingAllocator_raw_delete"](ptr)

    def has_standard_deleter(storage_impl):
        with _lock:
            if int(storage_impl) in adopted:
                return True
        return ORIGINALS["_has_Standard_Deleter"](storage_impl)

    def free_and_remove_deleter(storage_impl):
        with _lock:
            ptr = adopted[int(storage_impl)][0] if int(storage_impl) in adopted else None
            if ptr is not None:
                vram_free(ptr)  # its other storages lose it too, as aliases do
                COUNTS["freed_remove_deleter"] += 1
        if ptr is None:
            ORIGINALS["_free_And_Remove_DeleterFn"](storage_impl)

    replacements = {
        "_cuda_beginAllocateCurrentStreamToPool": begin,
        "_cuda_beginAllocateCurrentThreadToPool": begin,  # newer PyTorch: the thread's; its stream here
        "_cuda_endAllocateCurrentStreamToPool": end,
        "_cuda_endAllocateToPool": end,
        "_cuda_releasePool": release,
        "_cuda_checkPoolLiveAllocations": live_equal,
        "_cuda_getCheckpointState": get_checkpoint,
        "_cuda_setCheckpointPoolState": set_checkpoint,
        "_cuda_cudaCachingAllocator_raw_delete": raw_delete,
        "_has_Standard_Deleter": has_standard_deleter,
        "_free_And_Remove_DeleterFn": free_and_remove_deleter,
    }
    for name, fn in replacements.items():
        if hasattr(c_module, name):
            ORIGINALS[name] = getattr(c_module, name)
            setattr(c_module, name, fn)
