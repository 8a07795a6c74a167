/* safetensors.h — reading and writing the GPT's weights as safetensors (the format of the
 * Hugging Face hub): an 8-byte little-endian header length, a JSON header mapping each tensor
 * name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data that
 * follows the header) plus an optional "__metadata__" of strings, then the data.
 *
 * Names and layouts are PyTorch's GPT2LMHeadModel: transformer.wte.weight, transformer.wpe.weight,
 * transformer.h.N.{ln_1,ln_2}.{weight,bias}, transformer.h.N.attn.c_attn.weight, ...,
 * transformer.ln_f.*, with the four projections as Conv1D weights, [in, out] (the transpose of
 * nn.h's Linear [out, in]); lm_head.weight is tied to wte and usually absent. The mask buffers
 * older checkpoints carry (attn.bias, attn.masked_bias) are ignored; any other name is another
 * architecture. Heads are not in the weights: "n_head" in __metadata__, else width / 64 (GPT-2's
 * head size). GELU is GPT-2's tanh form unless __metadata__ says "activation": "gelu_erf"; vram
 * writes "gelu_erf" or "gelu_tanh", the model's (vram_gpt_config.activation).
 */
#ifndef VRAM_SAFETENSORS_H
#define VRAM_SAFETENSORS_H

#include "vram/model_file.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_safetensors vram_safetensors;

/* Maps and parses `path`; every tensor's dtype (F32, F16, BF16), shape and range are checked. */
vram_status vram_safetensors_open(const char *path, vram_safetensors **out);
void vram_safetensors_close(vram_safetensors *st);
/* The GPT-2 shape the tensors describe (arch "gpt2"). */
vram_status vram_safetensors_gpt_info(vram_safetensors *st, vram_model_info *info);
/* Tensor `name` (nn.h's name, e.g. "h.0.attn.c_attn.weight") as f32 rows x cols in nn.h's
 * layout, converted from the file's dtype and layout. dst NULL: only checks that the tensor is
 * there with that shape. */
vram_status vram_safetensors_read_gpt(vram_safetensors *st, const char *name, int64_t rows, int64_t cols, float *dst);
uint64_t vram_safetensors_bytes_read(const vram_safetensors *st);
/* 1 when the file has no lm_head.weight: the output head is the token embedding (GPT-2's tie). */
int vram_safetensors_tied(vram_safetensors *st);

/* Writes g's weights under PyTorch's names (lm_head.weight too where it is not wte's copy). */
vram_status vram_safetensors_save_gpt(const char *path, vram_gpt *g);

#ifdef __cplusplus
}
#endif

#endif
