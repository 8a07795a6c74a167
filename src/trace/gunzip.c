/* gunzip.c — a self-contained gzip (RFC 1952) / DEFLATE (RFC 1951) decoder, so that the
 * bundled .trace.gz files load on a machine without zlib's headers (a fresh Debian has the
 * zlib library but not zlib1g-dev). Where zlib is found at build time, trace.c uses zlib and
 * this is only the fallback; tests run both and compare.
 *
 * Structure: a bit reader (64-bit buffer, LSB first as DEFLATE packs bits), canonical Huffman
 * tables decoded with one lookup each (a table of 2^maxlen entries, entry = symbol << 4 |
 * code length; the codes are bit-reversed into the table since DEFLATE sends them MSB first),
 * and the three block types: stored, fixed and dynamic Huffman. Each gzip member's CRC-32 and
 * length are checked (and its header's CRC where it has one), and after the last member only
 * zero padding may follow, so a truncated or corrupt file is an error, never a short trace.
 * Everything is bounds-checked: bad input returns VRAM_ERR_PARSE, never reads out of range.
 */
#include "gunzip.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct inflater {
    const uint8_t *in;
    size_t inlen, inpos;
    uint64_t bitbuf;
    unsigned bitcnt;
    uint8_t *out;
    size_t outlen, outcap;
    const char *name;
    vram_gunzip_enough enough; /* asked before the output buffer grows (gunzip.h) */
    void *enough_ctx;
    int stopped;               /* enough said so: decoding ends, the output so far is the result */
} inflater;

typedef struct huff {
    uint16_t *table; /* 1 << maxlen entries; 0xffff = no code */
    unsigned maxlen;
} huff;

#define HUFF_NONE 0xffffu

static void fill(inflater *s) {
    while (s->bitcnt <= 56 && s->inpos < s->inlen) {
        s->bitbuf |= (uint64_t)s->in[s->inpos++] << s->bitcnt;
        s->bitcnt += 8;
    }
}

/* n <= 32 bits; -1 when the input ends first. */
static int64_t getbits(inflater *s, unsigned n) {
    if (n == 0) return 0;
    if (s->bitcnt < n) fill(s);
    if (s->bitcnt < n) return -1;
    uint64_t v = s->bitbuf & ((1ull << n) - 1);
    s->bitbuf >>= n;
    s->bitcnt -= n;
    return (int64_t)v;
}

/* Builds the table for `n` code lengths. Over-subscribed sets are errors; incomplete ones
 * are allowed (DEFLATE permits one distance code), and their holes decode as errors. */
static int huff_build(huff *h, const uint8_t *lens, unsigned n, uint16_t *storage) {
    unsigned count[16] = {0};
    unsigned maxlen = 0;
    for (unsigned i = 0; i < n; i++) {
        if (lens[i] > 15) return -1;
        count[lens[i]]++;
        if (lens[i] > maxlen) maxlen = lens[i];
    }
    count[0] = 0;
    int left = 1;
    for (unsigned len = 1; len <= 15; len++) {
        left <<= 1;
        left -= (int)count[len];
        if (left < 0) return -1;
    }
    unsigned next[16];
    unsigned code = 0;
    for (unsigned len = 1; len <= 15; len++) {
        code = (code + count[len - 1]) << 1;
        next[len] = code;
    }
    h->table = storage;
    h->maxlen = maxlen;
    size_t size = (size_t)1 << maxlen;
    for (size_t i = 0; i < size; i++) storage[i] = HUFF_NONE;
    for (unsigned sym = 0; sym < n; sym++) {
        unsigned len = lens[sym];
        if (!len) continue;
        unsigned c = next[len]++;
        unsigned rev = 0;
        for (unsigned b = 0; b < len; b++) rev |= ((c >> b) & 1u) << (len - 1 - b);
        for (size_t k = rev; k < size; k += (size_t)1 << len) storage[k] = (uint16_t)(sym << 4 | len);
    }
    return 0;
}

/* One symbol; -1 on a bad code or the end of input. */
static int decode(inflater *s, const huff *h) {
    if (h->maxlen == 0) return -1;
    if (s->bitcnt < h->maxlen) fill(s);
    uint16_t e = h->table[s->bitbuf & ((1u << h->maxlen) - 1)];
    if (e == HUFF_NONE) return -1;
    unsigned len = e & 15u;
    if (len > s->bitcnt) return -1; /* the code runs past the end of the input */
    s->bitbuf >>= len;
    s->bitcnt -= len;
    return e >> 4;
}

/* Room for `need` more output bytes: 0, or -1 when the host is out of memory or the caller's
 * `enough` stopped the decoding (s->stopped). */
static int put(inflater *s, size_t need) {
    if (s->outcap - s->outlen >= need) return 0;
    if (s->enough && s->outlen && s->enough(s->out, s->outlen, s->enough_ctx)) {
        s->stopped = 1;
        return -1;
    }
    size_t cap = s->outcap ? s->outcap : 1 << 20;
    while (cap - s->outlen < need) {
        if (cap > SIZE_MAX / 4) return -1;
        cap *= 2;
    }
    uint8_t *o = realloc(s->out, cap);
    if (!o) return -1;
    s->out = o;
    s->outcap = cap;
    return 0;
}

static const uint16_t len_base[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129,
                                       193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

/* The literal/length and distance codes of one block, until end of block. */
static vram_status inflate_codes(inflater *s, const huff *lit, const huff *dist) {
    for (;;) {
        int sym = decode(s, lit);
        if (sym < 0) return vram_error(VRAM_ERR_PARSE, "%s: corrupt or truncated gzip data (bad code)", s->name);
        if (sym < 256) {
            if (put(s, 1)) return vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", s->name);
            s->out[s->outlen++] = (uint8_t)sym;
            continue;
        }
        if (sym == 256) return VRAM_OK;
        sym -= 257;
        if (sym >= 29) return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (bad length code)", s->name);
        int64_t e = getbits(s, len_extra[sym]);
        if (e < 0) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip data", s->name);
        size_t len = len_base[sym] + (size_t)e;
        int d = decode(s, dist);
        if (d < 0 || d >= 30) return vram_error(VRAM_ERR_PARSE, "%s: corrupt or truncated gzip data (bad distance)", s->name);
        e = getbits(s, dist_extra[d]);
        if (e < 0) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip data", s->name);
        size_t distance = dist_base[d] + (size_t)e;
        if (distance > s->outlen) return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (distance too far back)", s->name);
        if (put(s, len)) return vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", s->name);
        uint8_t *o = s->out + s->outlen;
        const uint8_t *from = o - distance;
        for (size_t i = 0; i < len; i++) o[i] = from[i]; /* overlapping copies repeat */
        s->outlen += len;
    }
}

static vram_status inflate_stored(inflater *s) {
    /* Drop to a byte boundary; what is left in the bit buffer is whole bytes. */
    unsigned drop = s->bitcnt & 7u;
    s->bitbuf >>= drop;
    s->bitcnt -= drop;
    int64_t len = getbits(s, 16), nlen = getbits(s, 16);
    if (len < 0 || nlen < 0) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip data", s->name);
    if ((uint16_t)len != (uint16_t)~nlen) return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (stored block length)", s->name);
    if (put(s, (size_t)len)) return vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", s->name);
    for (int64_t i = 0; i < len; i++) {
        int64_t b = getbits(s, 8);
        if (b < 0) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip data", s->name);
        s->out[s->outlen++] = (uint8_t)b;
    }
    return VRAM_OK;
}

typedef struct tables {
    uint16_t lit[1 << 15], dist[1 << 15], cl[1 << 7];
} tables;

static vram_status inflate_dynamic(inflater *s, tables *tb) {
    static const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    int64_t hlit = getbits(s, 5), hdist = getbits(s, 5), hclen = getbits(s, 4);
    if (hlit < 0 || hdist < 0 || hclen < 0) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip data", s->name);
    unsigned nlit = (unsigned)hlit + 257, ndist = (unsigned)hdist + 1, ncl = (unsigned)hclen + 4;
    if (nlit > 286 || ndist > 30) return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (code counts)", s->name);
    uint8_t cl_lens[19] = {0};
    for (unsigned i = 0; i < ncl; i++) {
        int64_t v = getbits(s, 3);
        if (v < 0) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip data", s->name);
        cl_lens[order[i]] = (uint8_t)v;
    }
    huff cl;
    if (huff_build(&cl, cl_lens, 19, tb->cl)) return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (code lengths)", s->name);
    uint8_t lens[286 + 30];
    unsigned n = 0;
    while (n < nlit + ndist) {
        int sym = decode(s, &cl);
        if (sym < 0) return vram_error(VRAM_ERR_PARSE, "%s: corrupt or truncated gzip data", s->name);
        if (sym < 16) {
            lens[n++] = (uint8_t)sym;
            continue;
        }
        uint8_t value = 0;
        int64_t rep;
        if (sym == 16) {
            if (n == 0) return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (repeat with no length)", s->name);
            value = lens[n - 1];
            rep = getbits(s, 2);
            rep = rep < 0 ? -1 : 3 + rep;
        } else if (sym == 17) {
            rep = getbits(s, 3);
            rep = rep < 0 ? -1 : 3 + rep;
        } else {
            rep = getbits(s, 7);
            rep = rep < 0 ? -1 : 11 + rep;
        }
        if (rep < 0) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip data", s->name);
        if (n + (unsigned)rep > nlit + ndist) return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (too many lengths)", s->name);
        while (rep--) lens[n++] = value;
    }
    if (lens[256] == 0) return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (no end-of-block code)", s->name);
    huff lit, dist;
    if (huff_build(&lit, lens, nlit, tb->lit) || huff_build(&dist, lens + nlit, ndist, tb->dist))
        return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (Huffman code)", s->name);
    return inflate_codes(s, &lit, &dist);
}

static vram_status inflate_fixed(inflater *s, tables *tb) {
    uint8_t lens[288 + 30];
    unsigned i = 0;
    for (; i < 144; i++) lens[i] = 8;
    for (; i < 256; i++) lens[i] = 9;
    for (; i < 280; i++) lens[i] = 7;
    for (; i < 288; i++) lens[i] = 8;
    for (; i < 288 + 30; i++) lens[i] = 5;
    huff lit, dist;
    huff_build(&lit, lens, 288, tb->lit);
    huff_build(&dist, lens + 288, 30, tb->dist);
    return inflate_codes(s, &lit, &dist);
}

/* ---- CRC-32 (the gzip polynomial, reflected) ---------------------------------------------- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

/* ---- gzip members ------------------------------------------------------------------------- */

static vram_status skip_header(inflater *s) {
    const uint8_t *in = s->in;
    size_t p = s->inpos, n = s->inlen;
    if (n - p < 10) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip header", s->name);
    if (in[p] != 0x1f || in[p + 1] != 0x8b) return vram_error(VRAM_ERR_PARSE, "%s: not gzip data", s->name);
    if (in[p + 2] != 8) return vram_error(VRAM_ERR_PARSE, "%s: unknown gzip compression method %u", s->name, in[p + 2]);
    uint8_t flg = in[p + 3];
    if (flg & 0xe0) return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip header (reserved flags)", s->name);
    p += 10;
    if (flg & 4) { /* FEXTRA */
        if (n - p < 2) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip header", s->name);
        size_t xlen = in[p] | (size_t)in[p + 1] << 8;
        p += 2;
        if (n - p < xlen) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip header", s->name);
        p += xlen;
    }
    for (int bit = 8; bit <= 16; bit <<= 1) { /* FNAME, FCOMMENT: zero-terminated */
        if (!(flg & bit)) continue;
        while (p < n && in[p]) p++;
        if (p >= n) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip header", s->name);
        p++;
    }
    if (flg & 2) { /* FHCRC: the low 16 bits of the CRC-32 of the header before it */
        if (n - p < 2) return vram_error(VRAM_ERR_PARSE, "%s: truncated gzip header", s->name);
        if ((crc32_of(in + s->inpos, p - s->inpos) & 0xffff) != (uint32_t)(in[p] | in[p + 1] << 8))
            return vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip header (header CRC mismatch)", s->name);
        p += 2;
    }
    s->inpos = p;
    return VRAM_OK;
}

vram_status vram_gunzip(const uint8_t *in, size_t inlen, const char *name, uint8_t **out, size_t *outlen) {
    return vram_gunzip_until(in, inlen, name, NULL, NULL, out, outlen);
}

vram_status vram_gunzip_until(const uint8_t *in, size_t inlen, const char *name, vram_gunzip_enough enough, void *ctx,
                              uint8_t **out, size_t *outlen) {
    *out = NULL;
    *outlen = 0;
    inflater s = {.in = in, .inlen = inlen, .name = name ? name : "gzip", .enough = enough, .enough_ctx = ctx};
    tables *tb = malloc(sizeof *tb);
    if (!tb) return vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", s.name);
    vram_status st = VRAM_OK;
    do {
        if ((st = skip_header(&s)) != VRAM_OK) break;
        size_t member_start = s.outlen;
        s.bitbuf = 0;
        s.bitcnt = 0;
        int last = 0;
        while (!last && st == VRAM_OK) {
            int64_t hdr = getbits(&s, 3);
            if (hdr < 0) {
                st = vram_error(VRAM_ERR_PARSE, "%s: truncated gzip data", s.name);
                break;
            }
            last = (int)(hdr & 1);
            switch (hdr >> 1) {
            case 0: st = inflate_stored(&s); break;
            case 1: st = inflate_fixed(&s, tb); break;
            case 2: st = inflate_dynamic(&s, tb); break;
            default: st = vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (block type 3)", s.name);
            }
        }
        if (st != VRAM_OK) break;
        /* Give back whole unread bytes in the bit buffer, then read the trailer. */
        s.inpos -= s.bitcnt / 8;
        s.bitbuf = 0;
        s.bitcnt = 0;
        if (s.inlen - s.inpos < 8) {
            st = vram_error(VRAM_ERR_PARSE, "%s: truncated gzip data (no trailer)", s.name);
            break;
        }
        const uint8_t *t = s.in + s.inpos;
        uint32_t crc = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
        uint32_t isize = (uint32_t)t[4] | (uint32_t)t[5] << 8 | (uint32_t)t[6] << 16 | (uint32_t)t[7] << 24;
        s.inpos += 8;
        if (crc != crc32_of(s.out ? s.out + member_start : s.out, s.outlen - member_start) || /* (no output yet: NULL) */
            isize != (uint32_t)(s.outlen - member_start)) {
            st = vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (CRC or length mismatch)", s.name);
            break;
        }
        /* Another member may follow, or zero padding; anything else is an error (a member whose
         * header was damaged must not silently end the data), as in trace.c's zlib reader. */
        while (s.inpos < s.inlen && s.in[s.inpos] == 0) s.inpos++;
        if (s.inpos == s.inlen) break;
        if (s.in[s.inpos] != 0x1f || (s.inlen - s.inpos > 1 && s.in[s.inpos + 1] != 0x8b)) {
            st = vram_error(VRAM_ERR_PARSE, "%s: data after the gzip data that starts no gzip member", s.name);
            break;
        }
    } while (1);
    free(tb);
    if (s.stopped) {
        vram_error_clear();
        st = VRAM_OK; /* (put's failure was the stop, not the host's memory) */
    }
    if (st != VRAM_OK) {
        free(s.out);
        return st;
    }
    *out = s.out;
    *outlen = s.outlen;
    if (!*out) {
        *out = malloc(1);
        if (!*out) return vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", s.name);
    }
    return VRAM_OK;
}
