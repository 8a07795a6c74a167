/* bpe.h — GPT-2's byte-level BPE tokenizer: text to token ids and back, from the vocab.json and
 * merges.txt files GPT-2 checkpoints ship with (OpenAI's encoder.json / vocab.bpe, Hugging Face's
 * GPT2Tokenizer files).
 *
 * Encoding follows OpenAI's encoder.py: the UTF-8 text is split by GPT-2's pre-tokenizer pattern
 * ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+), each piece's
 * bytes become one symbol each, and the adjacent pair of lowest merge rank is merged (every
 * occurrence, left to right) until no pair has a rank; the symbols are then vocabulary ids. The
 * files spell bytes through GPT-2's byte-to-unicode map (printable bytes as themselves, the others
 * as U+0100 onwards: a space is "Ġ"). Special tokens get no special treatment: "<|endoftext|>" in
 * a text is encoded as its characters. Decoding concatenates the ids' bytes.
 */
#ifndef VRAM_BPE_H
#define VRAM_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "vram/vram.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_bpe vram_bpe;

/* Reads the two files; every error (a missing, unreadable, corrupt or inconsistent file: a merge
 * whose parts or result the vocabulary lacks, a vocabulary without every single byte) is one
 * message naming the file and where, and a status (VRAM_ERR_NOT_FOUND, VRAM_ERR_PARSE). */
vram_status vram_bpe_load(const char *vocab_json, const char *merges_txt, vram_bpe **out);
void vram_bpe_free(vram_bpe *t);
/* One more than the largest id. */
int32_t vram_bpe_vocab_size(const vram_bpe *t);
/* len bytes of UTF-8 text to *n ids (*ids malloc'd; free() it). Text that is not valid UTF-8
 * is VRAM_ERR_INVALID_ARG naming the byte offset. */
vram_status vram_bpe_encode(const vram_bpe *t, const char *text, size_t len, int32_t **ids, int64_t *n);
/* n ids to *len bytes (*text malloc'd, NUL-terminated; free() it). An id not in the vocabulary
 * is VRAM_ERR_INVALID_ARG. The bytes need not be valid UTF-8 (a multi-byte character may span
 * tokens). */
vram_status vram_bpe_decode(const vram_bpe *t, const int32_t *ids, int64_t n, char **text, size_t *len);
/* The pre-tokenizer alone: the end offsets (bytes) of the *n pieces of text (*ends malloc'd). */
vram_status vram_bpe_pretokenize(const char *text, size_t len, size_t **ends, int64_t *n);

#ifdef __cplusplus
}
#endif

#endif
