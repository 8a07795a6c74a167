/* driver.c — runs a fuzz target without libFuzzer: over seed files, then over bounded random
 * mutations of them, so the harness is exercised in every `make test` (and under the
 * sanitizers) even where clang's libFuzzer is not used.
 *
 * usage: fuzz_X_driver [--mutate N] [--seconds S] PATH...   (a PATH may be a directory)
 * Mutations are deterministic (xorshift64): byte flips, insertions of tokens that matter to
 * the parsers (digits, signs, huge numbers, record letters, newlines), deletions and line
 * duplications. Without seeds, the inputs are random bytes of random length (what a target
 * that reads its input as a byte program wants). The run stops after N inputs or S seconds,
 * whichever comes first.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../test_rng.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seed {
    uint8_t *data;
    size_t size;
} seed;

static seed seeds[4096];
static size_t nseeds;

static void add_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f || nseeds >= sizeof seeds / sizeof seeds[0]) {
        if (f) fclose(f);
        return;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    if (n < 0 || n > (1 << 20)) {
        fclose(f);
        return;
    }
    uint8_t *d = malloc((size_t)n + 1);
    if (d && fread(d, 1, (size_t)n, f) == (size_t)n) {
        seeds[nseeds].data = d;
        seeds[nseeds].size = (size_t)n;
        nseeds++;
    } else {
        free(d);
    }
    fclose(f);
}

static void add_path(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return;
    if (!S_ISDIR(sb.st_mode)) {
        add_file(path);
        return;
    }
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        add_file(p);
    }
    closedir(d);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { return test_rng(&rng); }

static const char *tokens[] = {"a ", "f ", "\n", " ", "-", "0", "1", "9", "18446744073709551615",
                               "9223372036854775807", "99999999999999999999999", "65535", "65536", "#",
                               "# memtrace v1\n", "\t", "\r\n", "a 1 512 0\n", "f 1\n", "x", "\0"};

static size_t mutate(uint8_t *buf, size_t len, size_t cap) {
    int rounds = 1 + (int)(next() % 4);
    for (int r = 0; r < rounds; r++) {
        uint64_t kind = next() % 5;
        size_t pos = len ? (size_t)(next() % (len + 1)) : 0;
        if (kind == 0 && len) { /* flip a byte */
            buf[pos % len] ^= (uint8_t)(1u << (next() % 8));
        } else if (kind == 1) { /* insert a token */
            const char *tok = tokens[next() % (sizeof tokens / sizeof tokens[0])];
            size_t tl = strlen(tok) ? strlen(tok) : 1;
            if (len + tl > cap) continue;
            memmove(buf + pos + tl, buf + pos, len - pos);
            memcpy(buf + pos, tok, tl);
            len += tl;
        } else if (kind == 2 && len) { /* delete a range */
            size_t dl = 1 + (size_t)(next() % 8);
            if (pos + dl > len) dl = len - pos;
            memmove(buf + pos, buf + pos + dl, len - pos - dl);
            len -= dl;
        } else if (kind == 3 && len) { /* duplicate the line at pos */
            size_t s = pos < len ? pos : len - 1;
            while (s > 0 && buf[s - 1] != '\n') s--;
            size_t e = s;
            while (e < len && buf[e] != '\n') e++;
            if (e < len) e++;
            size_t ll = e - s;
            if (len + ll > cap) continue;
            memmove(buf + e + ll, buf + e, len - e);
            memcpy(buf + e, buf + s, ll);
            len += ll;
        } else if (len) { /* cut the end: a truncated file */
            len = pos;
        }
    }
    return len;
}

int main(int argc, char **argv) {
    long mutations = 0;
    double seconds = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mutate") && i + 1 < argc) mutations = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else add_path(argv[i]);
    }
    for (size_t i = 0; i < nseeds; i++) LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].size);
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t cap = 1 << 16;
    uint8_t *buf = malloc(cap);
    long done = 0;
    for (; done < mutations; done++) {
        size_t len;
        if (nseeds) {
            const seed *s = &seeds[next() % nseeds];
            len = s->size < cap ? s->size : cap;
            memcpy(buf, s->data, len);
            len = mutate(buf, len, cap);
        } else {
            len = (size_t)(next() % 4096);
            for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)next();
        }
        LLVMFuzzerTestOneInput(buf, len);
        clock_gettime(CLOCK_MONOTONIC, &t1); /* every input: some targets take milliseconds each */
        if ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9 > seconds) {
            done++;
            break;
        }
    }
    free(buf);
    for (size_t i = 0; i < nseeds; i++) free(seeds[i].data);
    printf("%zu seeds, %ld %s inputs: no crash\n", nseeds, done, nseeds ? "mutated" : "random");
    return 0;
}
