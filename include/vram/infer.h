/* infer.h — a GPT-2-layout language model for inference: weights in f32, bf16 or INT8 (Q8_0, Q8_R),
 * a KV cache, and sampling, on the runtime's kernel table.
 *
 * A vram_lm holds only what generation needs: the weights (tag parameter), no gradients, no
 * optimizer, no graph. It loads from a .vram model file (model_file.h; f32 or quantized) or from
 * a safetensors file with PyTorch's GPT-2 names (safetensors.h). vram_lm_quantize converts its
 * matrices (the embeddings, the four projections of each block, the output head) to bf16 or
 * INT8 in place, one matrix at a time, so f32 and quantized copies of the whole model never
 * coexist; the vectors (biases, layer norms) stay f32. Products then read the stored format
 * directly (the linear_lowp kernel slot).
 *
 * A vram_kv_cache keeps each layer's keys and values, [batch, heads, capacity, head_dim] f32,
 * tagged VRAM_TAG_KV_CACHE, and each row's length. vram_lm_forward appends T tokens to rows
 * [row0, row0 + n) and returns the logits; it records no graph (no_grad), so its outputs and
 * intermediates are temporaries and nothing is an activation.
 */
#ifndef VRAM_INFER_H
#define VRAM_INFER_H

#include "vram/model_file.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_lm vram_lm;

/* From a .vram file (f32 or quantized) or a .safetensors file (by its contents' first bytes: a
 * .vram file starts with VRAMMODL). *bytes_read (may be NULL): bytes copied into the device. */
vram_status vram_lm_load(vram_runtime *rt, const char *path, vram_lm **out, uint64_t *bytes_read);
/* The same, converting each matrix of an f32 file to `want` (Q8_0, Q8_R or bf16) as soon as it is read,
 * so the whole f32 model never occupies memory: the peak is the converted model plus one f32
 * matrix. A file already quantized is VRAM_ERR_STATE. *kept as vram_lm_quantize's. */
vram_status vram_lm_load_as(vram_runtime *rt, const char *path, vram_wfmt want, vram_lm **out, uint64_t *bytes_read,
                            int *kept);
/* A copy of src (any format, on a host runtime) on runtime rt, e.g. a GPU's: the same weights in
 * the same formats, uploaded one at a time. Models are loaded and quantized on the host, then
 * copied, so the device holds only the final weights. *bytes (may be NULL): bytes uploaded. */
vram_status vram_lm_copy_to(const vram_lm *src, vram_runtime *rt, vram_lm **out, uint64_t *bytes);
/* From a training GPT's parameters (copied; the GPT is not kept). */
vram_status vram_lm_from_gpt(vram_gpt *g, vram_lm **out);
void vram_lm_free(vram_lm *m);
const vram_model_info *vram_lm_info(const vram_lm *m);
vram_runtime *vram_lm_runtime(const vram_lm *m);
/* Converts the matrices of an f32 model to fmt (VRAM_WFMT_Q8_0, _Q8_R or _BF16). A model
 * already in another format is VRAM_ERR_STATE; a matrix whose rows are not a multiple of 32
 * long stays f32 under Q8_0 (*kept, may be NULL, counts them). */
vram_status vram_lm_quantize(vram_lm *m, vram_wfmt fmt, int *kept);
/* The format of the model's matrices (f32 unless quantized). */
vram_wfmt vram_lm_format(const vram_lm *m);
/* Bytes of weights as stored (the sum of their tensors' storage). */
uint64_t vram_lm_weight_bytes(const vram_lm *m);
/* Bytes the same weights take in f32. */
uint64_t vram_lm_f32_bytes(const vram_lm *m);
/* Writes the model as a weights-only .vram file (flag QUANTIZED when not f32). */
vram_status vram_lm_save(const vram_lm *m, const char *path);

typedef struct vram_kv_cache vram_kv_cache;
/* A cache for `batch` rows of up to `capacity` tokens (<= the model's context). */
vram_status vram_kv_cache_new(vram_lm *m, int batch, int64_t capacity, vram_kv_cache **out);
void vram_kv_cache_free(vram_kv_cache *c);
/* Empties row `row` (-1: every row). */
void vram_kv_cache_reset(vram_kv_cache *c, int row);
int64_t vram_kv_cache_len(const vram_kv_cache *c, int row);
uint64_t vram_kv_cache_bytes(const vram_kv_cache *c);

/* Appends ids [n, T] (row-major) to cache rows [row0, row0 + n), which must have room.
 * logits: [n, T, vocab] when all_positions, else [n, vocab] for each row's last token. */
vram_status vram_lm_forward(vram_lm *m, vram_kv_cache *c, int row0, int n, int64_t T, const int32_t *ids,
                            int all_positions, vram_tensor **logits);

/* A token from logits[vocab]: temperature 0 = argmax; else softmax(logits / temperature) over
 * the top_k largest (0 = all), drawn with the runtime's random state. */
int32_t vram_lm_sample(vram_runtime *rt, const float *logits, int64_t vocab, double temperature, int top_k);

typedef struct vram_generate_opts {
    int tokens;         /* new tokens per prompt */
    double temperature; /* 0 = greedy */
    int top_k;          /* 0 = no cut */
    uint64_t seed;
    int no_cache;       /* recompute every prefix in full at every step (for comparison) */
} vram_generate_opts;

typedef struct vram_generate_stats {
    double prefill_s, decode_s;  /* wall time of the prompts' forward and of the later steps */
    uint64_t kv_cache_bytes;     /* the cache's size (0 with no_cache's per-step caches freed) */
} vram_generate_stats;

/* Generates o->tokens tokens after each of n prompts (prompts[i] of lens[i] tokens) into
 * out[n * o->tokens]. Each prompt plus its tokens must fit the context. */
vram_status vram_lm_generate(vram_lm *m, int n, const int32_t *const *prompts, const int64_t *lens,
                             const vram_generate_opts *o, int32_t *out, vram_generate_stats *st);

/* Mean next-token negative log-likelihood (nats) of `text` (bytes as tokens) in windows of the
 * model's context (the last window may be shorter); *tokens receives how many were predicted. */
vram_status vram_lm_nll(vram_lm *m, const uint8_t *text, uint64_t len, uint64_t max_tokens, double *nll,
                        uint64_t *tokens);

#ifdef __cplusplus
}
#endif

#endif
