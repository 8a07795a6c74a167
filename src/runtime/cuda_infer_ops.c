/* cuda_infer_ops.c — the CUDA kernel table's inference slots (linear_lowp, embedding_lowp,
 * kv_attention, gelu_tanh): launches of cuda_infer_kernels.cu on the runtime's compute stream.
 *
 * Those kernels are a fatbin of their own (vram_cuda_infer_fatbin, embedded by the build as the
 * main kernels are), loaded as a second module when the CUDA runtime opens and unloaded when it
 * closes; its function handles live here. The slots keep the CPU versions' contracts (rt_internal.h)
 * so generation.c runs unchanged on either device: the KV cache's row lengths arrive in host
 * memory and go to the kernels by value, in launches of at most VKI_MAX_ROWS rows each.
 * Errors are the runtime's sticky CUDA error (vram_cuda_fail): a head size beyond the attention
 * kernel's, or a build without the kernels, is reported by the next sync.
 */
#include <string.h>

#include "cuda_infer.h"
#include "cuda_infer_abi.h"
#include "cuda_rt.h"

enum { KI_LINEAR, KI_EMBEDDING, KI_KV_APPEND, KI_KV_ATTENTION, KI_GELU_TANH, KI_COUNT };

static const char *const ki_names[KI_COUNT] = {"vki_linear", "vki_embedding", "vki_kv_append", "vki_kv_attention",
                                               "vki_gelu_tanh"};

#if defined(VRAM_HAVE_CUDA_H) && defined(VRAM_HAVE_CUDA_KERNELS)

extern const unsigned char vram_cuda_infer_fatbin[];

static void *ki_module;
static void *ki_fn[KI_COUNT];

vram_status vram_cuda_infer_open(void) {
    return vram_cuda_module_load(vram_cuda_infer_fatbin, ki_names, KI_COUNT, ki_fn, &ki_module);
}

void vram_cuda_infer_close(void) {
    if (ki_module) vram_cuda_module_unload(ki_module);
    ki_module = NULL;
    memset(ki_fn, 0, sizeof ki_fn);
}

static void ki_launch(int k, int64_t blocks, int threads, void **args) {
    if (!ki_module) {
        vram_cuda_fail(VRAM_ERR_STATE, "GPU inference kernel %s: the inference module is not loaded", ki_names[k]);
        return;
    }
    vram_cuda_launch_fn(ki_fn[k], ki_names[k], blocks, threads, args);
}

#else

vram_status vram_cuda_infer_open(void) { return VRAM_OK; }
void vram_cuda_infer_close(void) {}
static void ki_launch(int k, int64_t blocks, int threads, void **args) {
    (void)blocks, (void)threads, (void)args;
    vram_cuda_fail(VRAM_ERR_UNSUPPORTED, "GPU inference kernel %s: no GPU kernels in this build", ki_names[k]);
}

#endif

enum { THREADS = 256, MAX_BLOCKS = 1 << 20 };

static int64_t blocks_for(int64_t work, int64_t per_block) {
    int64_t b = (work + per_block - 1) / per_block;
    return b < 1 ? 1 : b > MAX_BLOCKS ? MAX_BLOCKS : b;
}

void vram_cuda_linear_lowp(vram_runtime *rt, int fmt, int64_t M, int64_t N, int64_t K, const float *x, const void *w,
                           const float *bias, float *y) {
    (void)rt;
    if (M <= 0 || N <= 0) return;
    /* 4 values a lane a step where rows are 16-byte aligned: K a multiple of 4, aligned bases */
    int vec = K % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)w % 16 == 0;
    int64_t warps = N * ((M + VKI_MT - 1) / VKI_MT);
    void *args[] = {&fmt, &M, &N, &K, &x, &w, &bias, &y, &vec};
    ki_launch(KI_LINEAR, blocks_for(warps, THREADS / 32), THREADS, args);
}

void vram_cuda_embedding_lowp(int fmt, int64_t n_ids, int64_t c, int64_t rows, float *out, const void *table,
                              const int32_t *ids) {
    if (n_ids <= 0 || c <= 0) return;
    void *args[] = {&fmt, &n_ids, &c, &rows, &out, &table, &ids};
    ki_launch(KI_EMBEDDING, blocks_for(n_ids * c, THREADS), THREADS, args);
}

/* The rows go in groups of VKI_MAX_ROWS (the lengths are a by-value parameter); within a group the
 * append runs first, so every query of the call sees the keys of the tokens before it. scores
 * (the CPU's scratch) is unused: the kernel keeps its running softmax in registers. */
void vram_cuda_kv_attention(vram_runtime *rt, int64_t n, int64_t T, int64_t H, int64_t D, const float *qkv, float *kc,
                            float *vc, int64_t cap, const int64_t *lens, float *out, float *scores) {
    (void)rt, (void)scores;
    if (D > VKI_MAX_D) {
        vram_cuda_fail(VRAM_ERR_UNSUPPORTED, "GPU attention: head size %lld exceeds the kernel's %d", (long long)D,
                       (int)VKI_MAX_D);
        return;
    }
    int64_t C = H * D;
    for (int64_t r0 = 0; r0 < n; r0 += VKI_MAX_ROWS) {
        int64_t nr = n - r0 < VKI_MAX_ROWS ? n - r0 : VKI_MAX_ROWS;
        vki_lens L;
        memset(&L, 0, sizeof L);
        memcpy(L.len, lens + r0, sizeof *lens * (size_t)nr);
        const float *q = qkv + r0 * T * 3 * C;
        float *k = kc + r0 * H * cap * D, *v = vc + r0 * H * cap * D, *o = out + r0 * T * C;
        void *append[] = {&nr, &T, &H, &D, &q, &k, &v, &cap, &L};
        ki_launch(KI_KV_APPEND, blocks_for(nr * T * C, THREADS), THREADS, append);
        void *attend[] = {&nr, &T, &H, &D, &q, &k, &v, &cap, &L, &o};
        ki_launch(KI_KV_ATTENTION, blocks_for(nr * T * H, 1), VKI_ATT_THREADS, attend);
    }
}

void vram_cuda_gelu_tanh(int64_t n, float *out, const float *x) {
    if (n <= 0) return;
    void *args[] = {&n, &out, &x};
    ki_launch(KI_GELU_TANH, blocks_for(n, THREADS), THREADS, args);
}
