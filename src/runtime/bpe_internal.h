/* bpe_internal.h — what the tokenizer's files share: the Unicode classes of GPT-2's pre-tokenizer
 * pattern (bpe_unicode.c, generated), UTF-8 decoding, and GPT-2's byte-to-unicode map
 * (bpe_pretok.c); bpe.c builds the vocabulary and merges on them.
 */
#ifndef VRAM_BPE_INTERNAL_H
#define VRAM_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "vram/bpe.h"

typedef struct vram_bpe_range {
    uint32_t lo, hi;
} vram_bpe_range;

extern const vram_bpe_range vram_bpe_letters[], vram_bpe_numbers[], vram_bpe_spaces[];
extern const int vram_bpe_letters_count, vram_bpe_numbers_count, vram_bpe_spaces_count;

/* The code point at s[0..n) into *cp; returns its length (1 to 4), or 0 where the bytes are not
 * UTF-8 (a stray continuation byte, a truncated sequence, an overlong form, a surrogate, > U+10FFFF). */
int vram_bpe_utf8_next(const uint8_t *s, size_t n, uint32_t *cp);
/* GPT-2's byte-to-unicode map: the code point that spells byte b in vocab.json and merges.txt;
 * and back: the byte a code point spells, or -1 when it spells none. */
uint32_t vram_bpe_byte_to_cp(uint8_t b);
int vram_bpe_cp_to_byte(uint32_t cp);

/* Token text s[0..n) (UTF-8 in GPT-2's byte alphabet) to the bytes it spells, into dst (room for n);
 * returns the byte count, or -1 for bad UTF-8 or a character outside the alphabet. */
long vram_bpe_spell(const uint8_t *s, size_t n, uint8_t *dst);

/* The tokenizer (bpe.c). Tokens are the bytes they stand for, in one pool: tok_off/tok_len by id.
 * Hash tables: token bytes -> id (open addressing on str_slot), and per merge line the pair of
 * ids (a, b) -> (rank, id of a+b). */
typedef struct vram_bpe_pair {
    uint64_t key; /* (a << 32 | b) + 1; 0: empty */
    int32_t rank, merged;
} vram_bpe_pair;

struct vram_bpe {
    uint8_t *pool;
    size_t pool_len;
    size_t *tok_off;   /* [vocab] offset into pool, or SIZE_MAX for an id no token has */
    uint32_t *tok_len; /* [vocab] */
    int32_t vocab;     /* one more than the largest id */
    int32_t byte_id[256];
    int32_t *str_slot; /* [str_cap] id, -1 empty */
    size_t str_cap;
    vram_bpe_pair *pairs; /* [pair_cap] */
    size_t pair_cap, n_pairs;
};

enum { VRAM_BPE_MAX_FILE = 256 << 20, VRAM_BPE_MAX_ID = 1 << 24 };

uint64_t vram_bpe_hash(const uint8_t *s, size_t n);
/* The id of the token with bytes s[0..n), or -1. */
int32_t vram_bpe_find(const vram_bpe *t, const uint8_t *s, size_t n);
/* A whole regular file of at most VRAM_BPE_MAX_FILE bytes, NUL-terminated (what: for messages). */
vram_status vram_bpe_read_file(const char *path, const char *what, char **out, size_t *len);
/* vocab.json into t: the pool, ids, the token table and byte_id (bpe_vocab.c). */
vram_status vram_bpe_load_vocab(vram_bpe *t, const char *path);

#endif
