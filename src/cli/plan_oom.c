/* plan_oom.c — why an allocation failed and what would fit: the explanation `vram train` prints
 * on out of memory and `vram plan` prints for a configuration that does not fit.
 *
 * It names the allocator's bytes by category at the moment of the failure and the memory
 * reserved but free (cached blocks the failed request could not use), then plans each remedy
 * (plan.h: batch halved, gradient accumulation, checkpointing, a leaner optimizer) at the same
 * capacity and prints its predicted peak reserved and whether it fits. The remedies come from the
 * planner, which replays the run's own allocation stream, so they are figures, not advice.
 */
#include <stdio.h>

#include "cli.h"
#include "vram/plan.h"

static const char *mib(int64_t b, char *buf, size_t cap) {
    snprintf(buf, cap, "%.2f MiB", (double)b / (1024.0 * 1024.0));
    return buf;
}

const vram_cli_category vram_cli_categories[VRAM_CLI_CATEGORIES] = {
    {VRAM_TAG_PARAMETER, "parameters", "parameters"},
    {VRAM_TAG_GRADIENT, "gradients", "gradients"},
    {VRAM_TAG_OPTIMIZER_STATE, "optimizer state", "optimizer_state"},
    {VRAM_TAG_ACTIVATION, "activations", "activations"},
    {VRAM_TAG_TEMPORARY, "temporaries", "temporaries"},
    {VRAM_TAG_OTHER, "other", "other"},
};

void vram_cli_print_moment(FILE *out, const vram_plan_moment *m) {
    char b[32];
    for (int i = 0; i < VRAM_CLI_CATEGORIES; i++)
        fprintf(out, "%s%s %s", i ? ", " : "  ", vram_cli_categories[i].label,
                mib(m->tags[vram_cli_categories[i].tag], b, sizeof b));
    fprintf(out, "\n");
}

const char *const vram_cli_model_too_big = "the model's parameters alone do not fit: a smaller model or more memory";

int vram_cli_explain_oom(FILE *out, const char *tool, const vram_plan_moment *at, const vram_plan_config *c,
                         const char *no_remedies) {
    char b1[32], b2[32], b3[32];
    fprintf(out, "%s: at the failure: allocated %s, reserved %s, of which %s reserved but free (cached blocks too "
                 "small or split for the request)\n",
            tool, mib(at->allocated, b1, sizeof b1), mib(at->reserved, b2, sizeof b2),
            mib(at->reserved - at->allocated, b3, sizeof b3));
    vram_cli_print_moment(out, at);
    if (no_remedies) {
        fprintf(out, "%s: %s\n", tool, no_remedies);
        return 0;
    }
    vram_plan_remedy rem[8];
    int n = vram_plan_remedies(c, rem, 8);
    if (n < 0) {
        fprintf(out, "%s: the remedies could not be planned: %s\n", tool, vram_last_error());
        return 1;
    }
    uint64_t cap = n ? rem[0].result.capacity : c->capacity;
    fprintf(out, "%s: what would fit in %s (each remedy planned: this run's allocation stream through the allocator):\n",
            tool, mib((int64_t)cap, b1, sizeof b1));
    fprintf(out, "  %-42s %-26s %16s  %s\n", "remedy", "flags", "peak reserved", "fits");
    for (int i = 0; i < n; i++) {
        if (rem[i].peak_reserved < 0)
            snprintf(b1, sizeof b1, "over %dx that", (int)VRAM_PLAN_REMEDY_ROOM);
        else
            mib(rem[i].peak_reserved, b1, sizeof b1);
        fprintf(out, "  %-42s %-26s %16s  %s\n", rem[i].name, rem[i].flags, b1, rem[i].fits ? "yes" : "no");
    }
    if (!n) fprintf(out, "  (none applies: batch 1, checkpointing on, plain SGD; a smaller model or more memory)\n");
    return 0;
}
