/* data.h — a byte-level text dataset read from a file into host memory.
 *
 * The file is read whole at open (a FIFO or other non-regular file is refused, and a file
 * truncated later changes nothing); batches copy B random windows of T+1 bytes of it into i32
 * token tensors (inputs, and targets shifted by one). Tokens are bytes: the vocabulary is 256. The last `val_fraction` of the
 * file is the validation split.
 */
#ifndef VRAM_DATA_H
#define VRAM_DATA_H

#include "vram/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_text_data vram_text_data;

enum { VRAM_SPLIT_TRAIN = 0, VRAM_SPLIT_VAL = 1 };

/* Opens and maps `path`. Errors: VRAM_ERR_NOT_FOUND (no such file), VRAM_ERR_IO (unreadable
 * or not mappable), VRAM_ERR_INVALID_ARG (too small for a batch of context 1). */
vram_status vram_text_data_open(const char *path, double val_fraction, vram_text_data **out);
void vram_text_data_close(vram_text_data *d);
uint64_t vram_text_data_size(const vram_text_data *d);
/* Bytes in a split. */
uint64_t vram_text_data_split_size(const vram_text_data *d, int split);

/* Random windows from `split`, offsets drawn from the runtime's random state: ids and targets
 * are new [batch, context] i32 tensors (tag temporary). A split shorter than context + 1 bytes
 * is an error. */
vram_status vram_text_data_batch(vram_text_data *d, vram_runtime *rt, int split, int64_t batch, int64_t context,
                                 vram_tensor **ids, vram_tensor **targets);
/* A rank's shard of a data parallel batch: draws all `total` offsets of the batch, as
 * vram_text_data_batch(total) would (so every rank's random state stays the same), and makes
 * tensors of the `rows` windows from row `first` on. Rows [r*b, (r+1)*b) of N ranks are together
 * the single process's batch of N*b. */
vram_status vram_text_data_batch_rows(vram_text_data *d, vram_runtime *rt, int split, int64_t total, int64_t first,
                                      int64_t rows, int64_t context, vram_tensor **ids, vram_tensor **targets);

/* Entropy of the byte distribution of the training split, in nats (a streaming pass over the
 * mapping). A model that predicts only byte frequencies reaches exactly this loss. */
double vram_text_data_unigram_entropy(const vram_text_data *d);

#ifdef __cplusplus
}
#endif

#endif
