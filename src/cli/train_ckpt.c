/* train_ckpt.c — `vram train --save PATH [--save-every N]` and `--resume PATH`: the CLI side of
 * model_file.h (and of safetensors.h, for a PATH ending in .safetensors: weights only).
 *
 * The corpus size goes into the checkpoint and must match on resume: the random state that
 * resumes the batch order only means the same batches on the same corpus.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "vram/data.h"
#include "vram/model_file.h"
#include "vram/safetensors.h"

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

int vram_train_resume(const char *path, vram_gpt *g, vram_optimizer *opt, vram_text_data *data, int steps,
                      int *first_step) {
    vram_train_state ts = {.data_bytes = vram_text_data_size(data)};
    uint64_t bytes = 0;
    vram_status s = vram_gpt_resume(path, g, opt, &ts, &bytes);
    if (s != VRAM_OK) {
        fprintf(stderr, "vram train: --resume: %s\n", vram_last_error());
        return 2;
    }
    if (ts.step >= (uint64_t)steps) {
        fprintf(stderr, "vram train: --resume: '%s' is at step %llu already; give --steps beyond it\n", path,
                (unsigned long long)ts.step);
        return 2;
    }
    printf("resumed '%s' at step %llu: %.2f MiB copied from the file into allocator memory\n", path,
           (unsigned long long)ts.step, (double)bytes / (1024.0 * 1024.0));
    *first_step = (int)ts.step + 1;
    return 0;
}

int vram_train_save(const char *path, vram_gpt *g, vram_optimizer *opt, vram_text_data *data, int step) {
    vram_train_state ts = {.step = (uint64_t)step, .data_bytes = vram_text_data_size(data)};
    int st = ends_with(path, ".safetensors");
    vram_status s = st ? vram_safetensors_save_gpt(path, g) : vram_gpt_save(path, g, opt, &ts);
    if (s != VRAM_OK) {
        fprintf(stderr, "vram train: --save: %s\n", vram_last_error());
        return 1;
    }
    printf("saved step %d to '%s' (%s)\n", step, path, st ? "safetensors, weights only" : "weights, optimizer, step, random state");
    return 0;
}
