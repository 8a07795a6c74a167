/* test_bpe.c — GPT-2's byte-level BPE tokenizer (bpe.h).
 *
 *   test_bpe [FIXTURE_DIR]      (default tests/reference/bpe: vocab.json, vocab_utf8.json, merges.txt, cases.txt)
 *
 * From the specification, by hand: GPT-2's byte-to-unicode map at its landmarks (a space is U+0120,
 * byte 0 is U+0100, DEL U+0121, the soft hyphen U+0143) and its inverse; the pre-tokenizer's
 * splits of contractions, letter, number and other runs with their leading space, and white-space
 * runs that give their last character to what follows; merge order by rank and left-to-right
 * merging of repeats, on a hand-written vocabulary. Against the fixtures (make_fixtures.py: the
 * reference encoder with the regex module's GPT-2 pattern, 600 merges learned from text in several
 * scripts): every case's pieces and ids, both vocab.json spellings (\u escapes and raw UTF-8), and
 * decode(encode(text)) == text. Bad input: invalid UTF-8 of every kind, missing, corrupt and
 * inconsistent files, ids outside the vocabulary: each an error with a message, never a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/runtime/bpe_internal.h"
#include "check.h"

static char tmpdir[256];

static const char *write_tmp(const char *name, const char *text) {
    static char path[8][512];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    FILE *fp = fopen(p, "wb");
    fputs(text, fp);
    fclose(fp);
    return p;
}

static void test_byte_map(void) {
    CHECK(vram_bpe_byte_to_cp(' ') == 0x120, "a space is spelled U+0120 (Ġ)");
    CHECK(vram_bpe_byte_to_cp(0) == 0x100, "byte 0 is U+0100");
    CHECK(vram_bpe_byte_to_cp('\n') == 0x10a, "a newline is U+010A (Ċ)");
    CHECK(vram_bpe_byte_to_cp(0x7f) == 0x121, "DEL is U+0121");
    CHECK(vram_bpe_byte_to_cp(0xad) == 0x143, "the soft hyphen is U+0143, the last");
    CHECK(vram_bpe_byte_to_cp('!') == '!' && vram_bpe_byte_to_cp(0xe9) == 0xe9, "printable bytes spell themselves");
    int round = 1;
    for (int b = 0; b < 256; b++) round &= vram_bpe_cp_to_byte(vram_bpe_byte_to_cp((uint8_t)b)) == b;
    CHECK(round, "the map is a bijection on the 256 bytes");
    CHECK(vram_bpe_cp_to_byte(' ') == -1 && vram_bpe_cp_to_byte(0x144) == -1 && vram_bpe_cp_to_byte(0x4e00) == -1,
          "code points outside the alphabet spell no byte");
}

/* The pieces of text as end offsets, compared with want (count n). */
static void check_pieces(const char *text, const size_t *want, int64_t n) {
    size_t *ends = NULL;
    int64_t got = -1;
    CHECK_OK(vram_bpe_pretokenize(text, strlen(text), &ends, &got));
    int same = got == n;
    for (int64_t i = 0; same && i < n; i++) same = ends[i] == want[i];
    CHECK(same, "pieces of '%s': got %lld pieces (first end %zu)", text, (long long)got, got > 0 ? ends[0] : 0);
    free(ends);
}

#define PIECES(text, ...)                                                                \
    do {                                                                                 \
        static const size_t w_[] = {__VA_ARGS__};                                        \
        check_pieces(text, w_, (int64_t)(sizeof w_ / sizeof *w_));                        \
    } while (0)

static void test_pretokenizer_by_hand(void) {
    PIECES("I'm", 1, 3);                  /* a contraction is its own piece */
    PIECES("they're", 4, 7);
    PIECES("IT'S", 2, 3, 4);              /* contractions are lowercase only: ' is other, S a letter */
    PIECES("Hello world", 5, 11);         /* a space goes with the word after it */
    PIECES("a  b", 1, 2, 4);              /* white space gives its last character to what follows */
    PIECES("a   b", 1, 3, 5);
    PIECES("end   ", 3, 6);               /* ... unless nothing follows */
    PIECES("x2y", 1, 2, 3);               /* letters and numbers are separate runs */
    PIECES("in 1611,", 2, 7, 8);
    PIECES("a\n\nb", 1, 2, 3, 4);         /* a newline run lends its last too, which then stands alone */
    PIECES(" !?x", 3, 4);                 /* a space before other characters joins them */
    PIECES("caf\xc3\xa9 \xce\xb1\xce\xb2", 5, 10); /* letters beyond ASCII: é, Greek */
    size_t *ends = NULL;
    int64_t n = -1;
    CHECK_OK(vram_bpe_pretokenize("", 0, &ends, &n));
    CHECK(n == 0, "the empty text has no pieces");
    free(ends);
}

/* A vocabulary of the 256 bytes (as \u escapes) plus `extra` tokens, and its merges. */
static void tiny(const char *extra, const char *merges, vram_bpe **t) {
    char *v = malloc(65536);
    size_t n = (size_t)sprintf(v, "{");
    for (int b = 0; b < 256; b++) n += (size_t)sprintf(v + n, "\"\\u%04x\": %d, ", vram_bpe_byte_to_cp((uint8_t)b), b);
    sprintf(v + n, "%s}", extra);
    *t = NULL;
    CHECK_OK(vram_bpe_load(write_tmp("tiny.json", v), write_tmp("tiny.txt", merges), t));
    free(v);
}

static void check_ids(const vram_bpe *t, const char *text, const int32_t *want, int64_t n) {
    int32_t *ids = NULL;
    int64_t got = -1;
    CHECK_OK(vram_bpe_encode(t, text, strlen(text), &ids, &got));
    CHECK(got == n && (n == 0 || !memcmp(ids, want, sizeof *ids * (size_t)n)), "ids of '%s': %lld of them, first %d",
          text, (long long)got, got > 0 ? ids[0] : -1);
    free(ids);
}

#define IDS(t, text, ...)                                                                \
    do {                                                                                 \
        static const int32_t w_[] = {__VA_ARGS__};                                       \
        check_ids(t, text, w_, (int64_t)(sizeof w_ / sizeof *w_));                        \
    } while (0)

static void test_merges_by_hand(void) {
    vram_bpe *t = NULL;
    /* a b < b c: "abc" merges a+b first, then ab+c */
    tiny("\"ab\": 256, \"bc\": 257, \"abc\": 258", "#version: 0.2\na b\nb c\nab c\n", &t);
    if (t) {
        IDS(t, "abc", 258);
        IDS(t, "bc", 257);
        IDS(t, "cab", 'c', 256);
        vram_bpe_free(t);
    }
    /* b c < a b: "abc" becomes a + bc, and "a bc" is no merge: two tokens */
    tiny("\"ab\": 256, \"bc\": 257, \"abc\": 258", "b c\na b\nab c\n", &t);
    if (t) {
        IDS(t, "abc", 'a', 257);
        vram_bpe_free(t);
    }
    /* repeats merge left to right, every occurrence of the best pair in one pass */
    tiny("\"aa\": 256, \"aaaa\": 257", "a a\naa aa\n", &t);
    if (t) {
        IDS(t, "aaa", 256, 'a');
        IDS(t, "aaaa", 257);
        IDS(t, "aaaaa", 257, 'a');
        IDS(t, "a aa", 'a', 0x20, 256); /* merges stay inside a piece: " aa" is space, aa */
        vram_bpe_free(t);
    }
}

static uint8_t *unhex(const char *h, size_t *n) {
    size_t len = strlen(h);
    uint8_t *out = malloc(len / 2 + 1);
    *n = 0;
    if (strcmp(h, "-"))
        for (size_t i = 0; i + 1 < len; i += 2) {
            unsigned v = 0;
            sscanf(h + i, "%2x", &v);
            out[(*n)++] = (uint8_t)v;
        }
    return out;
}

static int64_t numbers(char *line, int64_t *out) {
    int64_t n = 0;
    if (!strcmp(line, "-")) return 0;
    for (char *tok = strtok(line, " "); tok; tok = strtok(NULL, " ")) out[n++] = strtoll(tok, NULL, 10);
    return n;
}

static void test_fixture_cases(const char *dir, const char *vocab_name) {
    char vp[512], mp[512], cp[512];
    snprintf(vp, sizeof vp, "%s/%s", dir, vocab_name);
    snprintf(mp, sizeof mp, "%s/merges.txt", dir);
    snprintf(cp, sizeof cp, "%s/cases.txt", dir);
    vram_bpe *t = NULL;
    CHECK_OK(vram_bpe_load(vp, mp, &t));
    FILE *fp = fopen(cp, "r");
    CHECK(fp != NULL, "cases file %s", cp);
    if (!t || !fp) {
        if (fp) fclose(fp);
        vram_bpe_free(t);
        return;
    }
    CHECK(vram_bpe_vocab_size(t) == 857, "%s: 857 tokens, got %d", vocab_name, vram_bpe_vocab_size(t));
    static char l1[8192], l2[8192], l3[8192];
    int cases = 0, good = 0;
    static int64_t ends[4096], ids[4096];
    while (fgets(l1, sizeof l1, fp) && fgets(l2, sizeof l2, fp) && fgets(l3, sizeof l3, fp)) {
        l1[strcspn(l1, "\n")] = l2[strcspn(l2, "\n")] = l3[strcspn(l3, "\n")] = 0;
        size_t len = 0;
        uint8_t *text = unhex(l1, &len);
        int64_t ne = numbers(l2, ends), ni = numbers(l3, ids);
        size_t *pe = NULL;
        int32_t *got = NULL;
        int64_t np = -1, ng = -1;
        int ok = vram_bpe_pretokenize((const char *)text, len, &pe, &np) == VRAM_OK && np == ne;
        for (int64_t i = 0; ok && i < ne; i++) ok = pe[i] == (size_t)ends[i];
        CHECK(ok, "case %d (%s): the pieces differ from the reference's", cases + 1, l1);
        int ok2 = vram_bpe_encode(t, (const char *)text, len, &got, &ng) == VRAM_OK && ng == ni;
        for (int64_t i = 0; ok2 && i < ni; i++) ok2 = got[i] == ids[i];
        CHECK(ok2, "case %d (%s): the ids differ from the reference's (%lld vs %lld ids)", cases + 1, l1, (long long)ng,
              (long long)ni);
        char *back = NULL;
        size_t blen = 0;
        int ok3 = got && vram_bpe_decode(t, got, ng, &back, &blen) == VRAM_OK && blen == len && !memcmp(back, text, len);
        CHECK(ok3, "case %d (%s): decode(encode(text)) is the text", cases + 1, l1);
        good += ok && ok2 && ok3;
        cases++;
        free(text), free(pe), free(got), free(back);
    }
    fclose(fp);
    CHECK(cases == 55, "%s: 55 cases read, %d", vocab_name, cases);
    printf("%s: %d of %d reference cases agree\n", vocab_name, good, cases);
    vram_bpe_free(t);
}

static void expect_error(vram_status got, vram_status want, const char *needle, const char *what) {
    const char *msg = vram_last_error();
    CHECK(got == want && msg && strstr(msg, needle), "%s: want %s with '%s', got %s: %s", what, vram_status_str(want),
          needle, vram_status_str(got), msg ? msg : "(none)");
}

static void test_bad_text(const char *dir) {
    char vp[512], mp[512];
    snprintf(vp, sizeof vp, "%s/vocab.json", dir);
    snprintf(mp, sizeof mp, "%s/merges.txt", dir);
    vram_bpe *t = NULL;
    CHECK_OK(vram_bpe_load(vp, mp, &t));
    if (!t) return;
    static const struct {
        const char *text, *where;
    } bad[] = {
        {"ok \xff", "byte 3"},              /* never in UTF-8 */
        {"\x80", "byte 0"},                 /* a stray continuation byte */
        {"ab\xc3", "byte 2"},               /* truncated */
        {"\xc0\xaf", "byte 0"},             /* overlong '/' */
        {"\xe0\x80\xaf", "byte 0"},         /* overlong, three bytes */
        {"x\xed\xa0\x80", "byte 1"},        /* a surrogate */
        {"\xf4\x90\x80\x80", "byte 0"},     /* beyond U+10FFFF */
        {"\xe4\xb8", "byte 0"},             /* truncated three-byte character */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int32_t *ids = NULL;
        int64_t n = -1;
        vram_status s = vram_bpe_encode(t, bad[i].text, strlen(bad[i].text), &ids, &n);
        expect_error(s, VRAM_ERR_INVALID_ARG, bad[i].where, "invalid UTF-8");
        CHECK(ids == NULL && n == -1, "a failed encode leaves its outputs alone");
    }
    char *text = NULL;
    size_t len = 0;
    int32_t out_of[3] = {5, 857, 1};
    expect_error(vram_bpe_decode(t, out_of, 3, &text, &len), VRAM_ERR_INVALID_ARG, "857", "decoding an id past the vocabulary");
    int32_t neg[1] = {-1};
    expect_error(vram_bpe_decode(t, neg, 1, &text, &len), VRAM_ERR_INVALID_ARG, "-1", "decoding a negative id");
    CHECK(text == NULL, "a failed decode leaves its output alone");
    int32_t *ids = NULL;
    int64_t n = -1;
    CHECK_OK(vram_bpe_encode(t, "", 0, &ids, &n));
    CHECK(n == 0, "the empty text is no tokens");
    free(ids);
    vram_bpe_free(t);
}

static void test_bad_files(const char *dir) {
    char vp[512], mp[512];
    snprintf(vp, sizeof vp, "%s/vocab.json", dir);
    snprintf(mp, sizeof mp, "%s/merges.txt", dir);
    vram_bpe *t = NULL;
    expect_error(vram_bpe_load("/nonexistent/vocab.json", mp, &t), VRAM_ERR_NOT_FOUND, "cannot open the vocabulary",
                 "a missing vocab.json");
    expect_error(vram_bpe_load(vp, "/nonexistent/merges.txt", &t), VRAM_ERR_NOT_FOUND, "cannot open the merges file",
                 "a missing merges.txt");
    expect_error(vram_bpe_load(tmpdir, mp, &t), VRAM_ERR_PARSE, "not a regular file", "a directory as vocab.json");
    static const struct {
        const char *json, *needle;
    } vocabs[] = {
        {"", "expected '{'"},
        {"[1, 2]", "expected '{'"},
        {"{}", "empty"},
        {"{\"a\": 0", "expected ',' or '}'"},
        {"{\"a\": 0} x", "text after the object"},
        {"{\"a\": -1}", "expected a token id"},
        {"{\"a\": 99999999999}", "beyond"},
        {"{\"a\" 0}", "expected ':'"},
        {"{\"a\": 0, \"b\": 0}", "id 0 is given to two tokens"},
        {"{\"a\": 0, \"a\": 1}", "given twice"},
        {"{\"a b\": 0}", "outside GPT-2's byte alphabet"},
        {"{\"\\x41\": 0}", "bad escape"},
        {"{\"\\ud800\": 0}", "high surrogate"},
        {"{\"\\udc00\": 0}", "lone low surrogate"},
        {"{\"a\xff\": 0}", "not valid UTF-8"},
        {"{\"abc", "ends inside a string"},
        {"{\"a\": 0}", "no token for the byte 0x00"},
    };
    for (size_t i = 0; i < sizeof vocabs / sizeof *vocabs; i++) {
        t = NULL;
        vram_status s = vram_bpe_load(write_tmp("bad.json", vocabs[i].json), mp, &t);
        expect_error(s, VRAM_ERR_PARSE, vocabs[i].needle, vocabs[i].json);
        CHECK(t == NULL, "a failed load gives no tokenizer");
    }
    static const struct {
        const char *merges, *needle;
    } merges[] = {
        {"#version: 0.2\nt h e\n", "line 2: not two tokens"},
        {"th\n", "line 1: not two tokens"},
        {"t  h\n", "not two tokens"},
        {"\xc4\x80 \xc4\x81\n", "line 1: '\xc4\x80 \xc4\x81' merges tokens the vocabulary lacks"},
        {"\xce\xb1 \xce\xb2\n", "line 1: a character outside GPT-2's byte alphabet"},
        {"z q\n", "merges tokens the vocabulary lacks"},
        {"t \xff\n", "outside GPT-2's byte alphabet"},
    };
    for (size_t i = 0; i < sizeof merges / sizeof *merges; i++) {
        t = NULL;
        vram_status s = vram_bpe_load(vp, write_tmp("bad.txt", merges[i].merges), &t);
        expect_error(s, VRAM_ERR_PARSE, merges[i].needle, merges[i].merges);
    }
    /* no merges at all is a valid (byte-level) tokenizer; CRLF line ends are accepted */
    t = NULL;
    CHECK_OK(vram_bpe_load(vp, write_tmp("empty.txt", ""), &t));
    if (t) {
        IDS(t, "hi", 'h' - '!', 'i' - '!'); /* GPT-2's order: '!' is id 0 */
        vram_bpe_free(t);
    }
    t = NULL;
    CHECK_OK(vram_bpe_load(vp, write_tmp("crlf.txt", "#version: 0.2\r\nt h\r\n"), &t));
    vram_bpe_free(t);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : VRAM_SOURCE_DIR "/tests/reference/bpe";
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vram_test_bpe_%d", (int)getpid());
    if (mkdir(tmpdir, 0700) != 0) {
        perror(tmpdir);
        return 1;
    }
    test_byte_map();
    test_pretokenizer_by_hand();
    test_merges_by_hand();
    test_fixture_cases(dir, "vocab.json");
    test_fixture_cases(dir, "vocab_utf8.json");
    test_bad_text(dir);
    test_bad_files(dir);
    static const char *const made[] = {"tiny.json", "tiny.txt", "bad.json", "bad.txt", "empty.txt", "crlf.txt"};
    for (size_t i = 0; i < sizeof made / sizeof *made; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", tmpdir, made[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    return check_done();
}
