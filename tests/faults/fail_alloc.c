/* fail_alloc.c — host allocation failure injection for the fault tests (tests/fault_sweep.py).
 *
 * Linked only into the test binary vram_faulty, whose link wraps malloc, calloc, realloc, strdup
 * and strndup (-Wl,--wrap=...): every host allocation that vram's own code makes comes here and
 * is numbered from 1 in call order. VRAM_FAIL_ALLOC_AT=N makes call N (and only it) fail as the C
 * library fails, NULL with errno ENOMEM; VRAM_FAIL_ALLOC_REPORT=FILE writes the number of calls
 * at exit, so a sweep knows how many points there are. Allocations inside the C library (fopen's
 * buffer, dlopen) are not numbered: --wrap sees only calls from vram's objects. Linking rather
 * than LD_PRELOAD keeps the sanitizers' own allocator in place, so the sweep runs under ASan too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

static unsigned long long calls, fail_at;
static int configured;

/* 1 when this call is the one to fail. getenv allocates nothing, so it is safe here. */
static int fail_now(void) {
    if (!__atomic_load_n(&configured, __ATOMIC_ACQUIRE)) {
        const char *e = getenv("VRAM_FAIL_ALLOC_AT");
        fail_at = e ? strtoull(e, NULL, 10) : 0;
        __atomic_store_n(&configured, 1, __ATOMIC_RELEASE);
    }
    unsigned long long n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    if (fail_at && n == fail_at) {
        errno = ENOMEM;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return fail_now() ? NULL : __real_strndup(s, n); }

__attribute__((destructor)) static void fail_alloc_report(void) {
    const char *path = getenv("VRAM_FAIL_ALLOC_REPORT");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    char line[32];
    int len = snprintf(line, sizeof line, "%llu\n", __atomic_load_n(&calls, __ATOMIC_RELAXED));
    if (write(fd, line, (size_t)len) != len) { /* the sweep then finds no count and says so */
    }
    close(fd);
}
