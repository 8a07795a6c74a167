/* cuda_infer_abi.h — what the inference kernels (cuda_infer_kernels.cu) and the host code that
 * launches them (cuda_infer_ops.c) agree on: the weight format codes (model_file.h's numbering),
 * the tile and size limits, and the row lengths handed to the KV cache kernels by value (a
 * kernel parameter, so no copy to the device and no wait precedes each step's attention).
 * Included from C and from CUDA C++: plain types only.
 */
#ifndef VRAM_CUDA_INFER_ABI_H
#define VRAM_CUDA_INFER_ABI_H

#include <stdint.h>

/* The same numbering as vram_wfmt (model_file.h). */
enum { VKI_F32 = 1, VKI_BF16 = 2, VKI_Q8_0 = 3, VKI_Q8_R = 4 };

enum {
    VKI_MT = 4,             /* activation rows per warp in vki_linear */
    VKI_ATT_THREADS = 128,  /* threads (keys per chunk) of a vki_kv_attention block */
    VKI_MAX_D = 1024,       /* the largest head size the attention kernel takes */
    VKI_MAX_ROWS = 64       /* cache rows per attention launch (the host splits larger batches) */
};

typedef struct vki_lens {
    int64_t len[VKI_MAX_ROWS];
} vki_lens;

#endif
