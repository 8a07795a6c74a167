/* cuda_abi.h — what the CUDA kernels (cuda_kernels.cu) and the host code that launches them
 * (cuda_ops.c) agree on: the dtype codes and the parameter block of the strided kernels.
 *
 * Included from C and from CUDA C++, so it holds only plain types. Strided kernels take one
 * vk_geom by value: up to VK_MAXD dimensions (after cuda_ops.c has merged the dimensions that
 * every operand walks contiguously) and up to three operands' strides, in elements.
 */
#ifndef VRAM_CUDA_ABI_H
#define VRAM_CUDA_ABI_H

#include <stdint.h>

#define VK_MAXD 6

/* The same numbering as vram_dtype (tensor.h). */
enum { VK_F64 = 0, VK_F32, VK_F16, VK_BF16, VK_I32, VK_I64, VK_I8, VK_U8 };

typedef struct vk_geom {
    int nd;
    int64_t n; /* elements: the product of shape */
    int64_t shape[VK_MAXD];
    int64_t st[3][VK_MAXD]; /* operand strides: [0] the output, [1] and [2] the inputs */
} vk_geom;

/* Layer norm's warp-per-row fast path (vk_layer_norm, vk_layer_norm_backward_x): 16-bit rows
 * whose width is a multiple of 256 up to this; the host launches 8 rows a block for them. The
 * one-pass backward (vk_layer_norm_backward_fused) takes multiples of 8 up to this. */
#define VK_LN_WARP_MAX 1024

/* The fused classifier's register kernel (vk_cross_entropy_rows): a block of VK_CE_REG_THREADS
 * a row, each thread holding VK_CE_REG_VPT of the 16-bit row's 16-byte vectors, so rows of up to
 * VK_CE_REG_VPT * VK_CE_REG_THREADS * 8 columns (GPT-2's padded 50304 included) are read from
 * memory once; wider rows take vk_cross_entropy_fused. */
#define VK_CE_REG_VPT 7
#define VK_CE_REG_THREADS 1024

/* Dynamic shared memory of the 128-key flash-attention backward (cuda_flash_backward128.cuh:
 * K and a dS^T buffer of 128 padded rows, two stages of 64-row Q and dO tiles and of lse and
 * dvec rows), which cuda_context.c grants those kernels at load. */
#define VK_FLASH128_SMEM (2 * 128 * 72 * 2 + 2 * 2 * 64 * 72 * 2 + 2 * 2 * 64 * 4)
/* The same with a second dS^T buffer (its fused128p form). */
#define VK_FLASH128P_SMEM (VK_FLASH128_SMEM + 128 * 72 * 2)

/* One tensor of a multi-tensor optimizer update (vk_adam_update_list): its pointers, size and
 * where it starts in the concatenation of all the list's elements (padded to VK_LIST_CHUNK for
 * the vector form). */
typedef struct vk_adam_entry {
    char *p;
    const char *g;
    char *m, *v;
    char *lowp; /* NULL, or a 16-bit copy of p rewritten with it (kept weights, ops_mixed.c) */
    int64_t n, start;
} vk_adam_entry;

/* The vector list kernels (cuda_optim_list.cuh): each tensor's start in the concatenation is
 * padded to a multiple of this many elements (a multiple of 4), so that no chunk of it spans
 * two tensors. */
#define VK_LIST_CHUNK 4096

/* vk_adam_update_list_vec's step constants, converted to float once on the host (as the scalar
 * kernel's (T) casts round them): step size, sqrt of the second bias correction, the betas, eps,
 * the decoupled decay factor, the coupled weight decay, and clipping's factor. */
typedef struct vk_adam_consts {
    float ss, sb, b1, b2, eps, decay, wd, gc;
    int decoupled;
} vk_adam_consts;

/* One tensor of a multi-tensor reduction or scaling (vk_list_sum_squares, vk_list_scale). */
typedef struct vk_list_entry {
    char *x;
    int64_t n, start;
} vk_list_entry;

/* The reduced dimensions of a broadcast reduction (vk_reduce_add): the source's strides. */
typedef struct vk_red {
    int nd;
    int64_t n;
    int64_t shape[VK_MAXD];
    int64_t st[VK_MAXD];
} vk_red;

#endif
