/* check.h — the tests' assertion macros.
 *
 * CHECK(cond, ...) records a pass or a failure (with file, line and a printf message) and
 * carries on, so one run reports every broken expectation. A test program ends with
 * `return check_done();`, which prints "N passed, N failed" and exits non-zero on failure.
 * check_skip() exits 77, which CTest reports as skipped (GPU tests without a GPU).
 */
#ifndef VRAM_TESTS_CHECK_H
#define VRAM_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (cond) {                                                             \
            check_passed++;                                                     \
        } else {                                                                \
            check_failed++;                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

#define CHECK_OK(expr)                                                          \
    do {                                                                        \
        vram_status check_st_ = (expr);                                         \
        CHECK(check_st_ == VRAM_OK, "%s -> %s (%s)", #expr,                     \
              vram_status_str(check_st_), vram_last_error());                   \
    } while (0)

static inline int check_done(void) {
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

static inline void check_skip(const char *why) {
    printf("SKIP: %s\n", why);
    exit(77);
}

#endif
