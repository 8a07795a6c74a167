/* lock.h — the allocator's lock: a spin lock that biases itself, once, to a thread that takes it
 * over and over, so that a thread allocating alone executes no atomic read-modify-write.
 *
 * Most programs allocate from one thread, and an atomic exchange is dear on some hosts: 9-10 ns
 * on the H200 machine's Intel host (bench_alloc_latency's "host atomic exchange" line), where a
 * whole cached allocate+free pair took 30 ns with two of them. So:
 *   - `spin` is the shared lock, a test-and-test-and-set spin lock (an atomic exchange);
 *   - a thread that takes `spin` VRAM_LOCK_BIAS_AFTER times in a row, no other thread between,
 *     biases the lock to itself (`owner`, then `biased`). The owner then enters by storing
 *     owner_in = 1 and reading `biased` (a plain store and load, no fence) and leaves by storing
 *     owner_in = 0;
 *   - any other thread takes `spin` and, finding the lock biased, revokes the bias: it clears
 *     `biased` and `owner`, makes every thread of the process execute a full memory barrier
 *     (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED) and waits until owner_in is 0. The barrier
 *     orders the owner's store of owner_in before its load of `biased` as the revoker sees them:
 *     either the revoker sees owner_in = 1 and waits, or the owner sees `biased` = 0 and takes
 *     `spin` (the asymmetric form of Dekker's mutual exclusion: the rare revoker pays for the
 *     owner's fence);
 *   - a revoked lock is never biased again: from then on every thread takes `spin`.
 * Why only once: owner_in is one word that the owner alone writes, but a former owner can be
 * caught between its load of `owner` and its store of owner_in (preempted there) while its bias is
 * revoked. Were the lock then biased to another thread, the former owner's late stores of
 * owner_in (1, then 0 when it sees that it is not the owner) could hide the new owner from a
 * revoker. With no second bias, a late store can only meet threads that hold `spin`, which leave
 * through `fast` = 0 and are never waited for through owner_in. A program with one allocating
 * thread keeps the bias for good; PyTorch, whose autograd thread allocates in the backward pass
 * and main thread in the forward, revokes it once and then runs on the spin lock as before.
 * Where membarrier is missing or refused (not Linux, kernels before 4.14, seccomp), the lock is
 * never biased.
 *
 * The holder records how it entered in `fast`, which only the holder reads, at release.
 * Locks are not nested by the allocator; nesting them would be safe too (each lock has its own
 * owner_in).
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
