/* infer_internal.h — the inference model's private structure, shared by infer_model.c (weights:
 * load, quantize, save) and generation.c (forward, cache, sampling).
 *
 * Weights are kept in the training GPT's parameter order (nn.h), so weight i of layer l is at
 * LM_LAYER0 + 12 * l + i with the per-layer order of lm_layer_slot.
 */
#ifndef VRAM_INFER_INTERNAL_H
#define VRAM_INFER_INTERNAL_H

#include "rt_internal.h"
#include "vram/infer.h"

typedef struct vram_lm_weight {
    char name[64];
    int64_t rows, cols; /* logical [rows, cols]; a vector is one row */
    vram_wfmt fmt;
    vram_tensor *t; /* f32 [rows, cols] (or [cols]); bf16 and Q8_0: u8 [bytes] */
} vram_lm_weight;

enum lm_layer_slot {
    LM_LN1_W, LM_LN1_B, LM_ATTN_W, LM_ATTN_B, LM_APROJ_W, LM_APROJ_B,
    LM_LN2_W, LM_LN2_B, LM_FC_W, LM_FC_B, LM_MPROJ_W, LM_MPROJ_B, LM_LAYER_SLOTS
};
enum { LM_WTE = 0, LM_WPE = 1, LM_LAYER0 = 2 };

struct vram_lm {
    vram_runtime *rt;
    vram_model_info info;
    int n;
    vram_lm_weight *w; /* [n]: wte, wpe, 12 per layer, ln_f weight and bias, lm_head */
    /* bf16 and Q8_0 weights are views into one block (their sizes, 1/32 over a power of two,
     * would each be rounded up to the allocator's next size class); NULL until needed */
    vram_tensor *arena;
    uint64_t arena_used;
    /* the output head is the token embedding (a safetensors file without lm_head.weight): the
     * last weight holds a reference to wte's tensor, converted and counted once */
    int tied;
};

#endif
