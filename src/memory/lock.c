/* lock.c — the allocator lock's shared path (lock.h): the spin lock with its waiting, revoking a
 * bias another thread holds (membarrier(2)), and biasing the lock, once, to a thread after a
 * streak.
 * The owner's enter and leave are lock.h's inline functions.
 */
#include <sched.h>
#include <stdint.h>

#include "lock.h"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__linux__) && defined(SYS_membarrier)
static int membarrier_call(int cmd) { return (int)syscall(SYS_membarrier, cmd, 0u, 0); }

/* The process that registered for MEMBARRIER_CMD_PRIVATE_EXPEDITED (0: none yet). Biasing needs
 * it: a lock is biased only where a revocation can make the owner's stores visible. */
static atomic_int registered_pid;

static int barrier_ready(void) {
    int pid = (int)getpid();
    if (atomic_load_explicit(&registered_pid, memory_order_relaxed) == pid) return 1;
    int q = membarrier_call(MEMBARRIER_CMD_QUERY);
    if (q < 0 || !(q & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return 0;
    if (membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) return 0;
    atomic_store_explicit(&registered_pid, pid, memory_order_relaxed);
    return 1;
}

/* A full memory barrier on every running thread of the process. A child of fork keeps its
 * parent's biased locks but may lack the registration (the kernel keeps it per address space):
 * register then; MEMBARRIER_CMD_GLOBAL (an RCU grace period, milliseconds) needs none. */
static void barrier_all(void) {
    if (membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    if (membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
        membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
        atomic_store_explicit(&registered_pid, (int)getpid(), memory_order_relaxed);
        return;
    }
    membarrier_call(MEMBARRIER_CMD_GLOBAL);
}
#else
static int barrier_ready(void) { return 0; } /* never biased: barrier_all is never needed */
static void barrier_all(void) {}
#endif

#if !defined(__x86_64__) && !defined(__aarch64__)
#include <pthread.h>
uintptr_t vram_lock_self_slow(void) { return (uintptr_t)pthread_self(); }
#endif

void vram_lock_init(vram_lock *l) {
    atomic_init(&l->spin, 0);
    atomic_init(&l->biased, 0);
    atomic_init(&l->owner_in, 0);
    atomic_init(&l->owner, 0);
    l->fast = 0;
    l->last = 0;
    l->streak = 0;
    l->bias_after = VRAM_LOCK_BIAS_AFTER;
    l->biases = l->revocations = 0;
}

static void wait_while_set(atomic_int *x) {
    for (int spins = 0; atomic_load_explicit(x, memory_order_acquire); spins++)
        if (spins > 64) sched_yield();
}

/* Takes the bias from its owner (the caller holds spin), for good: from the barrier on, the
 * owner's fast path sees `biased` = 0, and an owner already inside is waited for. */
static void bias_revoke(vram_lock *l) {
    atomic_store_explicit(&l->biased, 0, memory_order_relaxed);
    atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
    barrier_all();
    wait_while_set(&l->owner_in);
    l->revocations++;
    l->bias_after = UINT32_MAX; /* never biased again (lock.h: why) */
}

void vram_lock_acquire_shared(vram_lock *l) {
    if (atomic_exchange_explicit(&l->spin, 1, memory_order_acquire)) {
        for (int spins = 0;; spins++) {
            if (!atomic_load_explicit(&l->spin, memory_order_relaxed) &&
                !atomic_exchange_explicit(&l->spin, 1, memory_order_acquire))
                break;
            if (spins > 64) sched_yield();
        }
    }
    /* Only a holder of spin biases the lock, and an owner finding it biased enters without spin:
     * biased here means another thread owns it, and may be inside. */
    if (atomic_load_explicit(&l->biased, memory_order_relaxed)) bias_revoke(l);
    l->fast = 0; /* (only now: an owner inside reads it when it leaves) */
    uintptr_t self = vram_lock_self();
    if (self != l->last) {
        l->last = self;
        l->streak = 0;
    }
    if (l->bias_after == UINT32_MAX || ++l->streak < l->bias_after) return;
    if (!barrier_ready()) {
        l->bias_after = UINT32_MAX; /* cannot revoke: never bias */
        return;
    }
    atomic_store_explicit(&l->owner, self, memory_order_relaxed);
    atomic_store_explicit(&l->biased, 1, memory_order_release); /* (spin's release publishes both too) */
    l->biases++;
}
