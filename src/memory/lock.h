/* lock.h — the allocator's lock: a spin lock that biases itself, once, to a thread that takes it
 * over and over, so that a thread allocating alone executes no atomic read-modify-write (an
 * atomic exchange is a third of a cached pair on some hosts: docs/allocator-evidence.md §17).
 *
 *   - `spin` is the shared test-and-test-and-set lock (an atomic exchange);
 *   - a thread that takes `spin` VRAM_LOCK_BIAS_AFTER times in a row biases the lock to itself
 *     (`owner`, `biased`), then enters by storing owner_in = 1 and reading `biased` (no fence);
 *   - another thread revokes the bias under `spin`: clears `biased` and `owner`, runs
 *     membarrier(2) (every thread executes a full barrier) and waits until owner_in is 0 (the
 *     asymmetric Dekker: the rare revoker pays for the owner's fence);
 *   - a revoked lock is never biased again, and without membarrier never biased at all.
 * Why only once, and why that is safe: docs/allocator.md, "Threads". The holder records how it
 * entered in `fast`, read only at release. Locks are not nested by the allocator.
 */
#ifndef VRAM_LOCK_H
#define VRAM_LOCK_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct vram_lock {
    atomic_int spin;            /* the shared lock: 1 while held */
    atomic_int biased;          /* 1 while `owner` may enter through owner_in */
    atomic_int owner_in;        /* the owner is inside, or about to look at `biased` (owner only) */
    int fast;                   /* the holder entered as the owner (written and read by the holder) */
    _Atomic(uintptr_t) owner;   /* the thread the lock is biased to (vram_lock_self), or 0 */
    uintptr_t last;             /* under spin: the thread that took it last ... */
    uint32_t streak;            /* ... and how many times in a row */
    uint32_t bias_after;        /* the streak that biases the lock (VRAM_LOCK_BIAS_AFTER; tests
                                 * set it lower); UINT32_MAX once revoked: never again */
    uint64_t biases, revocations; /* counts (0 or 1 each), for tests and the curious */
} vram_lock;

#define VRAM_LOCK_BIAS_AFTER 256u

void vram_lock_init(vram_lock *l);
/* The shared path: takes `spin`, revokes a bias held by another thread, biases the lock to this
 * thread after a streak unless it was ever revoked (lock.c). */
void vram_lock_acquire_shared(vram_lock *l);

/* This thread's identity: its thread pointer (the TCB address glibc keeps in %fs), one load. */
static inline uintptr_t vram_lock_self(void) {
#if defined(__x86_64__) || defined(__aarch64__)
    return (uintptr_t)__builtin_thread_pointer();
#else
    extern uintptr_t vram_lock_self_slow(void);
    return vram_lock_self_slow();
#endif
}

static inline void vram_lock_acquire(vram_lock *l) {
    if (atomic_load_explicit(&l->owner, memory_order_relaxed) == vram_lock_self()) {
#ifdef VRAM_LOCK_TEST_WINDOW
        VRAM_LOCK_TEST_WINDOW(l); /* test_lock.c: a pause here, where a former owner may be caught */
#endif
        atomic_store_explicit(&l->owner_in, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst); /* the compiler's part of the fence; the CPU's is the revoker's membarrier */
        if (__builtin_expect(atomic_load_explicit(&l->biased, memory_order_acquire), 1)) {
            l->fast = 1;
            return;
        }
        atomic_store_explicit(&l->owner_in, 0, memory_order_release);
    }
    vram_lock_acquire_shared(l);
}

static inline void vram_lock_release(vram_lock *l) {
    if (l->fast) atomic_store_explicit(&l->owner_in, 0, memory_order_release);
    else atomic_store_explicit(&l->spin, 0, memory_order_release);
}

#endif
