/* summary.h — the memory summary table, PyTorch's torch.cuda.memory_summary() layout plus a
 * section of memory by tag (parameters, gradients, optimizer state, activations, ...).
 */
#ifndef VRAM_SUMMARY_H
#define VRAM_SUMMARY_H

#include "vram/alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Formats the summary of `stats` into a newly malloc'ed string (*out, freed by the caller).
 * `tag_names[i]` names tag i for i < stats->num_tags. `abbreviated` drops the per-pool rows. */
vram_status vram_stats_summary(const vram_stats *stats, const char *const *tag_names, int device_index,
                               int abbreviated, char **out);

/* The summary of an allocator's current statistics. On a CUDA device (cuda, cudasim) the labels
 * are PyTorch's, character for character (as vram_stats_summary's); on the host and the
 * simulator they name what is there: "OOMs", "alloc retries", "Reserved memory", ... */
vram_status vram_memory_summary(vram_allocator *a, int abbreviated, char **out);

#ifdef __cplusplus
}
#endif

#endif
