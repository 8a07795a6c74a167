/* test_lock.c — the allocator's biased lock (src/memory/lock.h): one thread gets the bias after
 * its streak and then enters without the shared lock; threads that take turns revoke it; a
 * forked child's second thread revokes the bias it inherited; and under every policy, from a bias
 * on every acquire to the allocator's own, no two threads are ever inside at once and no update
 * is lost. Runs under ThreadSanitizer too (label `threads`).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/memory/lock.h"
#include "check.h"

static void test_one_thread(void) {
    vram_lock l;
    vram_lock_init(&l);
    for (unsigned i = 0; i < VRAM_LOCK_REBIAS_FIRST - 1; i++) {
        vram_lock_acquire(&l);
        vram_lock_release(&l);
    }
    CHECK(l.biases == 0 && !atomic_load(&l.biased), "no bias before the streak (%llu)", (unsigned long long)l.biases);
    vram_lock_acquire(&l);
    int fast_before = l.fast;
    vram_lock_release(&l);
    vram_lock_acquire(&l);
    int fast_after = l.fast, spin_held = atomic_load(&l.spin);
    vram_lock_release(&l);
    CHECK(!fast_before, "the streak's last acquire takes the shared lock");
    if (l.biases == 0) {
        printf("membarrier unavailable here: the lock is never biased\n");
        CHECK(!fast_after && l.rebias_after == l.rebias_max, "without membarrier: shared lock, rarely asked again");
        return;
    }
    CHECK(l.biases == 1 && fast_after && !spin_held, "biased after %u acquires: entered without the shared lock",
          VRAM_LOCK_REBIAS_FIRST);
    CHECK(atomic_load(&l.owner_in) == 0, "left");
    for (int i = 0; i < 100000; i++) {
        vram_lock_acquire(&l);
        vram_lock_release(&l);
    }
    CHECK(l.biases == 1 && l.revocations == 0, "stays biased: %llu biases, %llu revocations",
          (unsigned long long)l.biases, (unsigned long long)l.revocations);
}

typedef struct shared {
    vram_lock lock;
    long counter;  /* plain: only the lock protects it */
    int inside;    /* plain: 1 while a thread is inside */
    long overlaps; /* entries that found another thread inside */
} shared;

typedef struct worker {
    shared *s;
    int id, bursts, per_burst;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    unsigned x = (unsigned)w->id * 2654435761u + 1;
    for (int b = 0; b < w->bursts; b++) {
        /* bursts of varying length, so that a thread keeps the lock a while (biased) and others
         * then come and revoke */
        x = x * 1103515245u + 12345u;
        int n = 1 + (int)((x >> 8) % (unsigned)w->per_burst);
        for (int i = 0; i < n; i++) {
            vram_lock_acquire(&w->s->lock);
            if (w->s->inside) w->s->overlaps++;
            w->s->inside = 1;
            long c = w->s->counter;
            for (volatile int spin = 0; spin < 20; spin++) {
            }
            w->s->counter = c + 1;
            w->s->inside = 0;
            vram_lock_release(&w->s->lock);
        }
        if ((x >> 20) % 4 == 0) sched_yield();
    }
    return NULL;
}

/* Four threads take the lock in bursts, the lock biased after a streak of `rebias_after` (growing
 * up to rebias_max with revocations). */
static void run_policy(unsigned rebias_after, unsigned rebias_max, int bursts) {
    enum { T = 4 };
    shared s = {0};
    vram_lock_init(&s.lock);
    s.lock.rebias_after = rebias_after;
    s.lock.rebias_max = rebias_max;
    pthread_t th[T];
    worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker){&s, i, bursts, 300};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    /* A broken lock usually hangs rather than miscounts (a revoker and an owner both inside
     * leave owner_in set for good): give up on it after two minutes, saying so. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 120;
    for (int i = 0; i < T; i++) {
        if (pthread_timedjoin_np(th[i], NULL, &deadline) != 0) {
            CHECK(0, "rebias after %u: thread %d still waiting after two minutes (the lock deadlocked)", rebias_after, i);
            exit(check_done());
        }
    }
    long expected = 0;
    for (int i = 0; i < T; i++) {
        unsigned x = (unsigned)i * 2654435761u + 1;
        for (int b = 0; b < bursts; b++) {
            x = x * 1103515245u + 12345u;
            expected += 1 + (long)((x >> 8) % 300u);
        }
    }
    printf("rebias after %u (max %u): %llu biases, %llu revocations, %ld entries\n", rebias_after, rebias_max,
           (unsigned long long)s.lock.biases, (unsigned long long)s.lock.revocations, s.counter);
    CHECK(s.counter == expected, "no update lost: %ld of %ld", s.counter, expected);
    CHECK(s.overlaps == 0, "never two inside: %ld overlaps", s.overlaps);
    CHECK(atomic_load(&s.lock.owner_in) == 0 && atomic_load(&s.lock.spin) == 0, "released");
    if (rebias_after <= 64 && s.lock.biases) /* (no bias at all: membarrier unavailable, said above) */
        CHECK(s.lock.revocations > 0, "threads taking turns revoke the bias (%llu)",
              (unsigned long long)s.lock.revocations);
}

/* A child of fork keeps the lock biased to the forking thread, and may lack the parent's membarrier
 * registration: a second thread of the child revokes it all the same, and the counts add up. */
typedef struct child_arg {
    vram_lock *l;
    long *counter;
} child_arg;

static void *child_taker(void *arg) {
    child_arg *c = arg;
    for (int i = 0; i < 1000; i++) {
        vram_lock_acquire(c->l);
        ++*c->counter;
        vram_lock_release(c->l);
    }
    return NULL;
}

static void test_fork(void) {
    vram_lock l;
    vram_lock_init(&l);
    for (unsigned i = 0; i < VRAM_LOCK_REBIAS_FIRST + 10; i++) {
        vram_lock_acquire(&l);
        vram_lock_release(&l);
    }
    if (!l.biases) return; /* no membarrier here (said above) */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        long counter = 0;
        child_arg c = {&l, &counter};
        pthread_t th;
        pthread_create(&th, NULL, child_taker, &c);
        for (int i = 0; i < 1000; i++) {
            vram_lock_acquire(&l);
            counter++;
            vram_lock_release(&l);
        }
        pthread_join(th, NULL);
        _exit(counter == 2000 && l.revocations >= 1 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a forked child's second thread revokes the inherited bias (status %d)", status);
}

int main(void) {
    test_one_thread();
    test_fork();
    run_policy(1, 1, 400);   /* biased to every taker: a revocation at every change of thread */
    run_policy(16, 64, 400); /* biased after short streaks */
    run_policy(VRAM_LOCK_REBIAS_FIRST, VRAM_LOCK_REBIAS_MAX, 400); /* the allocator's policy */
    return check_done();
}
