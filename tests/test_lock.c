/* test_lock.c — the allocator's biased lock (src/memory/lock.h): one thread gets the bias after
 * its streak and then enters without the shared lock; another thread revokes it, for good; a
 * forked child's second thread revokes the bias it inherited; and in hundreds of episodes of
 * threads taking the lock in bursts — with a pause planted in the owner's fast path, where a
 * former owner can be caught while its bias is revoked — no two threads are ever inside at once
 * and no update is lost. Runs under ThreadSanitizer too (label `threads`).
 */
/* The pause: every 64th fast-path entry of a thread yields between its load of `owner` and its
 * store of owner_in (lock.h, VRAM_LOCK_TEST_WINDOW), while test_window is set. */
#include <sched.h>
static int test_window;
static _Thread_local unsigned window_count;
#define VRAM_LOCK_TEST_WINDOW(l) \
    do {                          \
        (void)(l);                \
        if (test_window && ++window_count % 64 == 0) sched_yield(); \
    } while (0)

#include <pthread.h>
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
    for (unsigned i = 0; i < VRAM_LOCK_BIAS_AFTER - 1; i++) {
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
        CHECK(!fast_after && l.bias_after == UINT32_MAX, "without membarrier: the shared lock, never biased");
        return;
    }
    CHECK(l.biases == 1 && fast_after && !spin_held, "biased after %u acquires: entered without the shared lock",
          VRAM_LOCK_BIAS_AFTER);
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

/* One episode: four threads take a fresh lock in bursts, the lock biased to the first thread with
 * a streak of `bias_after` and revoked by the next; returns the lock's counts. */
static int episode(unsigned bias_after, int bursts, uint64_t *biases, uint64_t *revocations) {
    enum { T = 4 };
    shared s = {0};
    vram_lock_init(&s.lock);
    s.lock.bias_after = bias_after;
    pthread_t th[T];
    worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker){&s, i, bursts, 300};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    /* A broken lock often hangs rather than miscounts (a revoker waiting for an owner_in that
     * nobody clears): give up after two minutes, saying so. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 120;
    for (int i = 0; i < T; i++) {
        if (pthread_timedjoin_np(th[i], NULL, &deadline) != 0) {
            CHECK(0, "bias after %u: thread %d still waiting after two minutes (the lock deadlocked)", bias_after, i);
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
    *biases += s.lock.biases;
    *revocations += s.lock.revocations;
    int ok = s.counter == expected && s.overlaps == 0 && atomic_load(&s.lock.owner_in) == 0 &&
             atomic_load(&s.lock.spin) == 0 && s.lock.biases <= 1 && s.lock.revocations <= s.lock.biases;
    if (!ok)
        fprintf(stderr, "bias after %u: %ld of %ld entries, %ld overlaps, owner_in %d, spin %d, %llu biases, %llu revocations\n",
                bias_after, s.counter, expected, s.overlaps, atomic_load(&s.lock.owner_in), atomic_load(&s.lock.spin),
                (unsigned long long)s.lock.biases, (unsigned long long)s.lock.revocations);
    return ok;
}

static void run_episodes(unsigned bias_after, int episodes, int bursts, int window) {
    test_window = window;
    uint64_t biases = 0, revocations = 0;
    int bad = 0;
    for (int e = 0; e < episodes; e++) bad += !episode(bias_after, bursts, &biases, &revocations);
    test_window = 0;
    printf("bias after %u%s: %d episodes, %llu biases, %llu revocations, %d wrong\n", bias_after,
           window ? ", paused fast paths" : "", episodes, (unsigned long long)biases, (unsigned long long)revocations, bad);
    CHECK(bad == 0, "every episode exclusive, no update lost, at most one bias and one revocation (%d wrong)", bad);
    if (biases) /* (no bias at all: membarrier unavailable, said above) */
        CHECK(revocations * 2 > biases, "threads taking turns revoke the bias (%llu of %llu)",
              (unsigned long long)revocations, (unsigned long long)biases);
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
    for (unsigned i = 0; i < VRAM_LOCK_BIAS_AFTER + 10; i++) {
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
    run_episodes(1, 200, 40, 0);    /* biased at the first acquire, revoked at the first change */
    run_episodes(16, 200, 40, 1);   /* the same after short streaks, with paused fast paths */
    run_episodes(1, 200, 40, 1);
    run_episodes(VRAM_LOCK_BIAS_AFTER, 20, 400, 1); /* the allocator's policy */
    return check_done();
}
