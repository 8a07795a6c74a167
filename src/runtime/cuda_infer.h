/* cuda_infer.h — the GPU inference slots of the CUDA kernel table (cuda_infer_ops.c) and the two
 * things they need from cuda_context.c: a module of their own (the fatbin of
 * cuda_infer_kernels.cu, loaded when the CUDA runtime opens, unloaded when it closes) and launches
 * by function handle on the runtime's stream.
 */
#ifndef VRAM_CUDA_INFER_H
#define VRAM_CUDA_INFER_H

#include "rt_internal.h"

/* The four slots (rt_internal.h's contracts). lens of kv_attention is host memory, as on the CPU;
 * ids of embedding_lowp and every other pointer are device memory. */
void vram_cuda_linear_lowp(vram_runtime *rt, int fmt, int64_t M, int64_t N, int64_t K, const float *x, const void *w,
                           const float *bias, float *y);
void vram_cuda_embedding_lowp(int fmt, int64_t n_ids, int64_t c, int64_t rows, float *out, const void *table,
                              const int32_t *ids);
void vram_cuda_kv_attention(vram_runtime *rt, int64_t n, int64_t T, int64_t H, int64_t D, const float *qkv, float *kc,
                            float *vc, int64_t cap, const int64_t *lens, float *out, float *scores);
void vram_cuda_gelu_tanh(int64_t n, float *out, const float *x);

/* Loads and unloads the inference module (called by vram_cuda_runtime_open / _close). */
vram_status vram_cuda_infer_open(void);
void vram_cuda_infer_close(void);

/* cuda_context.c: a module from a fatbin image with its n functions resolved by name into fns;
 * unloading it; queuing function fn (named `name` in error messages) on the compute stream. */
vram_status vram_cuda_module_load(const void *image, const char *const *names, int n, void **fns, void **module);
void vram_cuda_module_unload(void *module);
void vram_cuda_launch_fn(void *fn, const char *name, int64_t blocks, int threads, void **args);

#endif
