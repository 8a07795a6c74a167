/* model_file.h — vram's model file (.vram): a versioned header, a directory of named tensors
 * and their data, as written by `vram train --save` and `vram quantize` and read by
 * `vram train --resume` and `vram generate`. docs/model-format.md is the byte-level layout.
 *
 * The header names the architecture and its shape, and, for a training checkpoint, the step,
 * the random state (which also decides the data batches: their offsets are drawn from it), the
 * corpus size and the optimizer's configuration. Each directory entry is a tensor: a dotted
 * name ("h.0.attn.c_attn.weight"), a role (parameter, or the first or second optimizer state
 * of the parameter of that name), a storage format (f32, bf16, Q8_0: int8 with one f16 scale
 * per block of 32, or Q8_R: int8 with one f32 scale per row), a shape, an offset and length, and a checksum of its bytes.
 *
 * Reading maps the file, checks the header, the directory and every range against the file's
 * size before anything is read; a tensor is copied out of the map into memory the caller
 * allocated (re-checking the file's size first, so a file truncated underneath is an error
 * rather than a SIGBUS on most paths), and its checksum is verified after the copy.
 */
#ifndef VRAM_MODEL_FILE_H
#define VRAM_MODEL_FILE_H

#include "vram/nn.h"
#include "vram/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { VRAM_MODEL_FILE_VERSION = 1 };

/* Storage formats of a tensor in the file (and of the inference weights, infer.h). */
typedef enum vram_wfmt {
    VRAM_WFMT_F32 = 1,
    VRAM_WFMT_BF16 = 2,
    VRAM_WFMT_Q8_0 = 3, /* [rows, cols], cols % 32 == 0: int8 q[rows*cols] then f16 scale[rows*cols/32] */
    VRAM_WFMT_Q8_R = 4  /* [rows, cols], per output channel: int8 q[rows*cols] then f32 scale[rows] */
} vram_wfmt;
const char *vram_wfmt_name(vram_wfmt f);
/* Bytes of a rows x cols matrix (or a vector: rows 1) in the format. */
uint64_t vram_wfmt_bytes(vram_wfmt f, int64_t rows, int64_t cols);

enum { VRAM_MF_ROLE_PARAM = 0, VRAM_MF_ROLE_OPT1 = 1, VRAM_MF_ROLE_OPT2 = 2 };
enum { VRAM_MF_TRAINING = 1u, VRAM_MF_QUANTIZED = 2u };

typedef struct vram_model_info {
    char arch[16];  /* "gpt2" */
    vram_gpt_config gpt;
    int activation; /* VRAM_ACT_* (nn.h), the same as gpt.activation */
    uint32_t flags; /* VRAM_MF_TRAINING: the fields below are set; VRAM_MF_QUANTIZED */
    uint64_t step;
    uint64_t rng[4];
    uint64_t data_bytes; /* size of the corpus trained on (a resume on another corpus is refused) */
    vram_optim_config optim;
} vram_model_info;

typedef struct vram_model_entry {
    const char *name;
    int role;
    vram_wfmt fmt;
    int ndim;
    int64_t shape[4];
    uint64_t nbytes;
    int64_t step; /* the optimizer's step count of this parameter (role OPT1) */
} vram_model_entry;

/* ---- reading ---- */
typedef struct vram_model_file vram_model_file;
/* Opens, maps and checks `path`. Errors: VRAM_ERR_NOT_FOUND, VRAM_ERR_IO, VRAM_ERR_PARSE (not a
 * vram model file, another version, a bad checksum, a truncated file or a range outside it). */
vram_status vram_model_file_open(const char *path, vram_model_file **out);
void vram_model_file_close(vram_model_file *f);
const vram_model_info *vram_model_file_info(const vram_model_file *f);
int vram_model_file_count(const vram_model_file *f);
void vram_model_file_entry(const vram_model_file *f, int i, vram_model_entry *e);
/* Index of the entry with that name and role, or -1. */
int vram_model_file_find(const vram_model_file *f, const char *name, int role);
/* Copies entry i's bytes into dst (cap >= its nbytes) and verifies its checksum. */
vram_status vram_model_file_read(vram_model_file *f, int i, void *dst, uint64_t cap);
/* Bytes copied out of the file so far. */
uint64_t vram_model_file_bytes_read(const vram_model_file *f);

/* ---- writing (to path.tmp, renamed over path on commit) ---- */
typedef struct vram_model_writer vram_model_writer;
vram_status vram_model_writer_open(const char *path, const vram_model_info *info, vram_model_writer **out);
vram_status vram_model_writer_add(vram_model_writer *w, const char *name, int role, vram_wfmt fmt, int ndim,
                                  const int64_t *shape, int64_t step, const void *data, uint64_t nbytes);
/* commit 1: writes directory and header and renames; 0: removes the partial file. Frees w. */
vram_status vram_model_writer_close(vram_model_writer *w, int commit);

/* ---- the GPT of nn.h ---- */
/* Training state saved with (or restored into) a checkpoint. */
typedef struct vram_train_state {
    uint64_t step;
    uint64_t data_bytes;
} vram_train_state;

/* Saves g's weights (f32) and, when opt and ts are given, the optimizer state, the step, the
 * runtime's random state and ts->data_bytes. */
vram_status vram_gpt_save(const char *path, vram_gpt *g, vram_optimizer *opt, const vram_train_state *ts);
/* A GPT with the file's shape and weights (an f32 file; a quantized one is VRAM_ERR_UNSUPPORTED).
 * *bytes_read (may be NULL) receives the bytes copied in. */
vram_status vram_gpt_load(vram_runtime *rt, const char *path, vram_gpt **out, uint64_t *bytes_read);
/* Resume: restores weights, optimizer state, step and random state into g and opt, which must have
 * the file's shape and optimizer; a file without training state, another shape, optimizer or
 * corpus size is an error. ts->data_bytes is checked, ts->step set. */
vram_status vram_gpt_resume(const char *path, vram_gpt *g, vram_optimizer *opt, vram_train_state *ts,
                            uint64_t *bytes_read);

/* Fills info's architecture fields from a GPT config (arch "gpt2", its GELU). */
void vram_model_info_from_gpt(vram_model_info *info, const vram_gpt_config *cfg);
/* Checks that info names an architecture this vram runs ("gpt2") with a sane shape. */
vram_status vram_model_info_check(const vram_model_info *info, const char *path);

#ifdef __cplusplus
}
#endif

#endif
