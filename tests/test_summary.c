/* test_summary.c — the memory summary's layout against PyTorch's memory_summary(), line by
 * line, on hand-built statistics: 77-character lines, units chosen per column from the "all"
 * row and switched at exactly 768 (KiB/MiB/...) and 750,000 (K/M), floor division, the
 * abbreviated form, the per-tag section; then the summary of a live allocator.
 * (The expected rows were produced by PyTorch's own formatting code, _format_size and
 * _format_count, on the same numbers.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "vram/summary.h"

#define G (1ll << 30)

static void set(vram_stat *s, int64_t c, int64_t p, int64_t a, int64_t f) {
    s->current = c;
    s->peak = p;
    s->allocated = a;
    s->freed = f;
}

/* Splits text into lines (the last one ends with '\n'); returns the count. */
static int split_lines(char *text, char **lines, int max) {
    int n = 0;
    char *p = text;
    while (*p && n < max) {
        char *nl = strchr(p, '\n');
        if (!nl) return -1;
        *nl = '\0';
        lines[n++] = p;
        p = nl + 1;
    }
    return n;
}

static int find_line(char **lines, int n, const char *want) {
    for (int i = 0; i < n; i++)
        if (!strcmp(lines[i], want)) return i;
    return -1;
}

static void test_layout(void) {
    vram_stats s;
    memset(&s, 0, sizeof s);
    set(&s.allocated_bytes[VRAM_POOL_ALL], G, 2 * G, 786431, 786432);
    set(&s.allocated_bytes[VRAM_POOL_LARGE], G - 512, 2 * G - 1024, 786000, 0);
    set(&s.allocated_bytes[VRAM_POOL_SMALL], 512, 1024, 431, 786432);
    set(&s.reserved_bytes[VRAM_POOL_ALL], 768 * G, 1023, 0, 1ll << 50);
    set(&s.allocation[VRAM_POOL_ALL], 749999, 750000, 750000000, 999);
    s.num_ooms = 7;
    s.num_alloc_retries = 12345;
    s.num_tags = VRAM_TAG_BUILTIN_COUNT;

    char *text = NULL;
    CHECK_OK(vram_stats_summary(&s, NULL, 3, 0, &text));
    if (!text) return;
    char *lines[200];
    int n = split_lines(text, lines, 200);
    CHECK(n == 47, "full summary has 47 lines, got %d", n);
    for (int i = 0; i < n; i++)
        CHECK(strlen(lines[i]) == 77 && lines[i][0] == '|' && lines[i][76] == '|', "line %d is 77 chars in |..|: '%s'", i,
              lines[i]);
    static const char *expect[] = {
        "|===========================================================================|",
        "|                  vram memory summary, device ID 3                         |",
        "|---------------------------------------------------------------------------|",
        "|            CUDA OOMs: 7            |        cudaMalloc retries: 12345     |",
        "|===========================================================================|",
        "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
        "|---------------------------------------------------------------------------|",
        "| Allocated memory      |   1024 MiB |   2048 MiB | 786431 B   |    768 KiB |",
        "|       from large pool |   1023 MiB |   2047 MiB | 786000 B   |      0 KiB |",
        "|       from small pool |      0 MiB |      0 MiB |    431 B   |    768 KiB |",
        "|---------------------------------------------------------------------------|",
        "| Active memory         |      0 B   |      0 B   |      0 B   |      0 B   |",
    };
    for (int i = 0; i < (int)(sizeof expect / sizeof expect[0]) && i < n; i++)
        CHECK(!strcmp(lines[i], expect[i]), "line %d:\n got  '%s'\n want '%s'", i, lines[i], expect[i]);
    CHECK(find_line(lines, n, "| GPU reserved memory   |    768 GiB |   1023 B   |      0 B   |   1024 TiB |") == 19,
          "reserved row");
    CHECK(find_line(lines, n, "| Allocations           |  749999    |     750 K  |     750 M  |     999    |") == 27,
          "allocations row (count units)");
    CHECK(find_line(lines, n, "| Requested memory      |      0 B   |      0 B   |      0 B   |      0 B   |") == 15,
          "requested row");
    CHECK(find_line(lines, n, "| Non-releasable allocs |       0    |       0    |       0    |       0    |") == 39,
          "non-releasable allocs row");
    CHECK(find_line(lines, n, "| Oversize allocations  |       0    |       0    |       0    |       0    |") == 43,
          "oversize allocations row");
    CHECK(find_line(lines, n, "| Oversize GPU segments |       0    |       0    |       0    |       0    |") == 45,
          "oversize segments row");
    CHECK(!strcmp(lines[n - 1], expect[0]), "closing rule");
    CHECK(strstr(text, "Memory by tag") == NULL, "no tag section without tag activity");
    free(text);

    /* Abbreviated: no per-pool rows. */
    CHECK_OK(vram_stats_summary(&s, NULL, 0, 1, &text));
    if (!text) return;
    n = split_lines(text, lines, 200);
    CHECK(n == 29, "abbreviated summary has 29 lines, got %d", n);
    CHECK(find_line(lines, n, "|       from large pool |   1023 MiB |   2047 MiB | 786000 B   |      0 KiB |") < 0,
          "no pool rows");
    CHECK(find_line(lines, n, "|                  vram memory summary, device ID 0                         |") == 1,
          "device 0 title");
    free(text);
}

static void test_tags(void) {
    vram_stats s;
    memset(&s, 0, sizeof s);
    s.num_tags = VRAM_TAG_BUILTIN_COUNT + 1;
    set(&s.tags[VRAM_TAG_PARAMETER].allocated_bytes, 512ll << 20, 512ll << 20, 512ll << 20, 0);
    set(&s.tags[VRAM_TAG_PARAMETER].requested_bytes, 500ll << 20, 500ll << 20, 500ll << 20, 0);
    set(&s.tags[VRAM_TAG_PARAMETER].allocation, 148, 148, 148, 0);
    set(&s.tags[VRAM_TAG_BUILTIN_COUNT].allocated_bytes, 0, 1024, 4096, 4096);
    set(&s.tags[VRAM_TAG_BUILTIN_COUNT].requested_bytes, 0, 1000, 4000, 4000);
    set(&s.tags[VRAM_TAG_BUILTIN_COUNT].allocation, 0, 1, 4, 4);
    const char *names[VRAM_TAG_MAX] = {"other", "parameter", "gradient", "optimizer_state", "activation", "temporary", "kv_cache",
                                       "a_rather_long_user_tag_name"};
    char *text = NULL;
    CHECK_OK(vram_stats_summary(&s, names, 1, 1, &text));
    if (!text) return;
    char *lines[200];
    int n = split_lines(text, lines, 200);
    /* 512 MiB is below 768 MiB, so PyTorch's rule shows it in KiB. */
    CHECK(n == 29 + 4 + 2 * 4, "summary with two active tags has %d lines", n);
    for (int i = 0; i < n; i++) CHECK(strlen(lines[i]) == 77, "line %d is 77 chars: '%s'", i, lines[i]);
    int at = find_line(lines, n, "| parameter             | 524288 KiB | 524288 KiB | 524288 KiB |      0 B   |");
    CHECK(at > 29, "parameter row at %d", at);
    if (at > 0 && at + 2 < n) {
        CHECK(!strcmp(lines[at + 1], "|   requested memory    | 512000 KiB | 512000 KiB | 512000 KiB |      0 B   |"),
              "requested row: '%s'", lines[at + 1]);
        CHECK(!strcmp(lines[at + 2], "|   allocations         |     148    |     148    |     148    |       0    |"),
              "allocations row: '%s'", lines[at + 2]);
    }
    CHECK(find_line(lines, n, "| a_rather_long_user_ta |      0 B   |   1024 B   |   4096 B   |   4096 B   |") > at,
          "user tag, name cut to 21 characters");
    CHECK(strstr(text, "gradient") == NULL, "inactive tags are left out");
    free(text);

    /* No names: "tag N". */
    CHECK_OK(vram_stats_summary(&s, NULL, 1, 1, &text));
    CHECK(text && strstr(text, "| tag 1      ") != NULL, "fallback tag name");
    free(text);
    CHECK(vram_stats_summary(NULL, NULL, 0, 0, &text) == VRAM_ERR_INVALID_ARG, "null stats");
}

/* The summary of a live allocator: its numbers are the allocator's statistics. */
static void test_allocator(void) {
    vram_device *dev;
    vram_allocator *a;
    CHECK_OK(vram_device_open("sim", &dev));
    CHECK_OK(vram_allocator_new(dev, NULL, &a));
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_allocator_malloc(a, 1 << 30, 0, VRAM_TAG_ACTIVATION, &p));
    CHECK_OK(vram_allocator_malloc(a, 1000, 0, VRAM_TAG_PARAMETER, &q));
    char *text = NULL;
    CHECK_OK(vram_memory_summary(a, 0, &text));
    if (text) {
        CHECK(strstr(text, "| Allocated memory      |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |") != NULL,
              "allocated row:\n%s", text);
        CHECK(strstr(text, "| activation            |   1024 MiB |") != NULL, "activation tag row");
        CHECK(strstr(text, "| parameter             |   1024 B   |") != NULL, "parameter tag row");
        free(text);
    }
    vram_allocator_free(a, p);
    vram_allocator_free(a, q);
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* PyTorch's words on a CUDA device (simulated here), plain ones on the host and the simulator:
 * a CPU run's summary spoke of "CUDA OOMs" and "GPU reserved memory". Same 77-character lines. */
static void test_device_words(void) {
    static const char *const specs[] = {"host:64MiB", "sim", "cudasim"};
    for (int k = 0; k < 3; k++) {
        vram_device *dev;
        vram_allocator *a;
        CHECK_OK(vram_device_open(specs[k], &dev));
        CHECK_OK(vram_allocator_new(dev, NULL, &a));
        void *p = NULL;
        CHECK_OK(vram_allocator_malloc(a, 4096, 0, VRAM_TAG_ACTIVATION, &p));
        char *text = NULL;
        CHECK_OK(vram_memory_summary(a, 0, &text));
        int cuda = k == 2;
        if (text) {
            int cuda_words = strstr(text, "CUDA OOMs") && strstr(text, "cudaMalloc retries") &&
                             strstr(text, "| GPU reserved memory   |") && strstr(text, "| Oversize GPU segments |");
            int gpu_word = strstr(text, "CUDA") || strstr(text, "cuda") || strstr(text, "GPU");
            CHECK(cuda ? cuda_words : !gpu_word, "%s: %s words:\n%s", specs[k], cuda ? "PyTorch's" : "no CUDA", text);
            if (!cuda)
                CHECK(strstr(text, "|                 OOMs: 0            |             alloc retries: 0         |") &&
                          strstr(text, "| Reserved memory       |") && strstr(text, "| Oversize segments     |"),
                      "%s: the plain words in PyTorch's columns:\n%s", specs[k], text);
            char *lines[128];
            int n = split_lines(text, lines, 128), wide = n > 0;
            for (int i = 0; i < n; i++) wide &= strlen(lines[i]) == 77;
            CHECK(wide, "%s: every line 77 characters", specs[k]);
            free(text);
        }
        vram_allocator_free(a, p);
        vram_allocator_destroy(a);
        vram_device_close(dev);
    }
}

int main(void) {
    test_device_words();
    test_layout();
    test_tags();
    test_allocator();
    return check_done();
}
