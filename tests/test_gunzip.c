/* test_gunzip.c — the built-in gzip decoder against the gzip program: the bundled traces
 * (dynamic Huffman blocks), tiny input (fixed Huffman), incompressible input (stored blocks),
 * header fields (file name), several members; and every truncation and many corruptions of a
 * real file are errors, never crashes or short output. vram_gunzip_until stops where its caller
 * says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/trace/gunzip.h"
#include "check.h"

static uint8_t *slurp(const char *cmd, size_t *len) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, p)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            uint8_t *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                buf = NULL;
            }
            buf = b;
        }
    }
    if (pclose(p) != 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* Decompresses gz with vram_gunzip and compares with `gzip -dc`. */
static void compare(const char *gz_cmd, const char *plain_cmd, const char *what) {
    size_t glen = 0, plen = 0;
    uint8_t *gz = slurp(gz_cmd, &glen);
    uint8_t *plain = slurp(plain_cmd, &plen);
    CHECK(gz && plain, "%s: inputs (%s)", what, gz_cmd);
    if (gz && plain) {
        uint8_t *out = NULL;
        size_t olen = 0;
        CHECK_OK(vram_gunzip(gz, glen, what, &out, &olen));
        CHECK(out && olen == plen && memcmp(out, plain, plen) == 0, "%s: %zu bytes out, want %zu", what, olen, plen);
        free(out);
    }
    free(gz);
    free(plain);
}

static void test_matches_gzip(void) {
    static const char *names[] = {"resnet50_train", "gpt2_train", "bert_varlen_train", "gpt2_generate"};
    char a[600], b[600];
    for (int i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "cat %s/traces/%s.trace.gz", VRAM_SOURCE_DIR, names[i]);
        snprintf(b, sizeof b, "gzip -dc %s/traces/%s.trace.gz", VRAM_SOURCE_DIR, names[i]);
        compare(a, b, names[i]);
    }
    compare("printf 'hello, hello, hello\\n' | gzip -c", "printf 'hello, hello, hello\\n'", "tiny (fixed codes)");
    compare("printf '' | gzip -c", "printf ''", "empty");
    compare("head -c 200000 /dev/zero | tr '\\0' 'x' | gzip -9 -c", "head -c 200000 /dev/zero | tr '\\0' 'x'",
            "long runs");
    /* Incompressible bytes make gzip write stored blocks. */
    compare("head -c 100000 /dev/urandom > /tmp/vram_gz_rand && gzip -c /tmp/vram_gz_rand",
            "cat /tmp/vram_gz_rand", "random (stored blocks, file name in header)");
    compare("(printf 'one\\n' | gzip -c; printf 'two\\n' | gzip -c)", "printf 'one\\ntwo\\n'", "two members");
    CHECK(system("rm -f /tmp/vram_gz_rand") == 0, "cleanup");
}

static void test_bad_input(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cat %s/traces/resnet50_train.trace.gz", VRAM_SOURCE_DIR);
    size_t glen = 0;
    uint8_t *gz = slurp(cmd, &glen);
    CHECK(gz != NULL, "input");
    if (!gz) return;
    uint8_t *out = NULL;
    size_t olen = 0;
    /* Every truncation point in the first 2 KiB and the last 64 bytes, and a spread between. */
    int bad = 0, total = 0;
    for (size_t cut = 0; cut < glen; cut += (cut < 2048 || cut + 64 > glen) ? 1 : 997) {
        vram_status st = vram_gunzip(gz, cut, "cut", &out, &olen);
        total++;
        if (st == VRAM_ERR_PARSE && out == NULL) bad++;
        free(out);
        out = NULL;
    }
    CHECK(bad == total, "every truncation is an error (%d of %d)", bad, total);
    /* Flipped bits: an error or (very rarely, if the change is undetectable) the same output;
     * the CRC makes a silently different result impossible in practice. */
    uint64_t x = 88172645463325252ull;
    size_t plen = 0;
    uint8_t *plain = NULL;
    CHECK_OK(vram_gunzip(gz, glen, "ok", &plain, &plen));
    int wrong = 0;
    for (int i = 0; i < 300; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t pos = (size_t)(x % glen);
        uint8_t bit = (uint8_t)(1u << ((x >> 32) % 8));
        gz[pos] ^= bit;
        vram_status st = vram_gunzip(gz, glen, "flip", &out, &olen);
        if (st == VRAM_OK && (olen != plen || memcmp(out, plain, plen) != 0)) wrong++;
        free(out);
        out = NULL;
        gz[pos] ^= bit;
    }
    CHECK(wrong == 0, "%d corruptions gave wrong output without an error", wrong);
    static const uint8_t not_gzip[] = "# memtrace v1\n";
    CHECK(vram_gunzip(not_gzip, sizeof not_gzip - 1, "x", &out, &olen) == VRAM_ERR_PARSE, "not gzip");
    CHECK(strstr(vram_last_error(), "x: not gzip") != NULL, "message: %s", vram_last_error());
    /* Garbage after a member. */
    uint8_t *two = malloc(glen + 3);
    memcpy(two, gz, glen);
    memcpy(two + glen, "abc", 3);
    CHECK(vram_gunzip(two, glen + 3, "trail", &out, &olen) == VRAM_ERR_PARSE &&
              strstr(vram_last_error(), "data after the gzip data that starts no gzip member"),
          "trailing garbage: %s", vram_last_error());
    memset(two + glen, 0, 3); /* zero padding after the last member is fine */
    CHECK(vram_gunzip(two, glen + 3, "padded", &out, &olen) == VRAM_OK && olen == plen, "zero padding");
    free(out);
    out = NULL;
    free(two);
    free(plain);
    free(gz);
}

/* CRC-32 (gzip's), bit by bit: the test's own, to build a header CRC. */
static uint32_t crc32_bits(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
    }
    return ~c;
}

/* A header CRC (FHCRC, which gzip itself never writes) is checked: right, the data comes out;
 * wrong, an error that says so. */
static void test_header_crc(void) {
    size_t glen = 0;
    uint8_t *gz = slurp("printf 'hello\\n' | gzip -n -c", &glen);
    CHECK(gz && glen > 18 && !(gz[3] & 0x1e), "input: a header without optional fields");
    if (!gz || glen <= 18) {
        free(gz);
        return;
    }
    uint8_t *h = malloc(glen + 2);
    memcpy(h, gz, 10);
    h[3] |= 2; /* FHCRC */
    uint32_t crc = crc32_bits(h, 10);
    h[10] = (uint8_t)crc;
    h[11] = (uint8_t)(crc >> 8);
    memcpy(h + 12, gz + 10, glen - 10);
    uint8_t *out = NULL;
    size_t olen = 0;
    CHECK(vram_gunzip(h, glen + 2, "hcrc", &out, &olen) == VRAM_OK && olen == 6 && !memcmp(out, "hello\n", 6),
          "the right header CRC: %s", vram_last_error());
    free(out);
    out = NULL;
    h[10] ^= 1;
    CHECK(vram_gunzip(h, glen + 2, "hcrc", &out, &olen) == VRAM_ERR_PARSE && !out &&
              strstr(vram_last_error(), "header CRC mismatch"),
          "a wrong header CRC is an error: %s", vram_last_error());
    free(h);
    free(gz);
}

/* `enough` stops decoding early: data that inflates to 64 MiB of one line comes back cut where
 * the caller said so (trace.c stops at a line over 1 MiB), and an `enough` that never stops
 * changes nothing. */
static int stop_past_1_5mib(const uint8_t *out, size_t len, void *ctx) {
    (void)out;
    ++*(int *)ctx;
    return len > (3u << 19);
}

static int never(const uint8_t *out, size_t len, void *ctx) {
    (void)out;
    (void)len;
    ++*(int *)ctx;
    return 0;
}

static void test_until(void) {
    size_t glen = 0;
    uint8_t *gz = slurp("head -c 67108864 /dev/zero | tr '\\0' x | gzip -1 -c", &glen);
    CHECK(gz != NULL, "64 MiB of x, gzip-compressed");
    if (!gz) return;
    uint8_t *out = NULL;
    size_t olen = 0;
    int asked = 0;
    CHECK_OK(vram_gunzip_until(gz, glen, "bomb", stop_past_1_5mib, &asked, &out, &olen));
    size_t xs = 0;
    while (out && xs < olen && out[xs] == 'x') xs++;
    CHECK(out && olen > (3u << 19) && olen <= (2u << 20) && xs == olen && asked == 2, /* asked near 1 and 2 MiB */
          "stopped at %zu bytes (all x: %d) after %d questions, of 64 MiB", olen, xs == olen, asked);
    free(out);
    asked = 0;
    CHECK_OK(vram_gunzip_until(gz, glen, "bomb", never, &asked, &out, &olen));
    CHECK(olen == (64u << 20) && asked == 6, "never stopped: all %zu bytes, %d questions (1 to 32 MiB)", olen, asked);
    free(out);
    free(gz);
}

int main(void) {
    test_matches_gzip();
    test_until();
    test_bad_input();
    test_header_crc();
    return check_done();
}
