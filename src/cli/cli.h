/* cli.h — the subcommands of the `vram` command. Each lives in src/cli/<name>.c, takes the
 * arguments after its name (argv[0] is the subcommand name) and returns the process exit
 * status: 0 success, 1 a failed run (e.g. out of memory in a replay), 2 bad input or usage.
 */
#ifndef VRAM_CLI_H
#define VRAM_CLI_H

#include <stddef.h>

int vram_cmd_version(int argc, char **argv);
int vram_cmd_smi(int argc, char **argv);
int vram_cmd_replay(int argc, char **argv);
int vram_cmd_bench(int argc, char **argv);
int vram_cmd_train(int argc, char **argv);
int vram_cmd_plan(int argc, char **argv);
int vram_cmd_viz(int argc, char **argv);
int vram_cmd_generate(int argc, char **argv);
int vram_cmd_quantize(int argc, char **argv);

/* `vram train --resume/--save` (train_ckpt.c): 0 on success, else the exit status after a message.
 * resume sets *first_step to the step after the saved one. */
struct vram_gpt;
struct vram_optimizer;
struct vram_text_data;
int vram_train_resume(const char *path, struct vram_gpt *g, struct vram_optimizer *opt, struct vram_text_data *data,
                      int steps, int *first_step);
int vram_train_save(const char *path, struct vram_gpt *g, struct vram_optimizer *opt, struct vram_text_data *data,
                    int step);

/* `vram train --trace` (train_trace.c): start recording the allocator's events before the run
 * allocates; at its end write them as a memtrace v1 file (0, or 1 after a message). */
struct vram_allocator;
int vram_train_trace_start(struct vram_allocator *a);
int vram_train_trace_write(struct vram_allocator *a, const char *path, const char *source);

/* 0 when VRAM_ALLOC_CONF and the --conf string (NULL: none) parse; else prints the error as
 * "TOOL: ..." and returns 2 (conf_check.c). */
int vram_cli_check_conf(const char *tool, const char *conf);

/* A number flag's value within [lo, hi] (cli_numbers.c): 1 with *out set, or 0 after printing
 * "vram TOOL: FLAG needs a number (an integer) in [lo, hi], not 'V'". */
int vram_cli_number(const char *tool, const char *flag, const char *v, double lo, double hi, double *out);
int vram_cli_integer(const char *tool, const char *flag, const char *v, int lo, int hi, int *out);

/* ---- the planner (plan.c, plan_oom.c, model_spec.c) ---- */
#include <stdio.h>

#include "vram/plan.h"

/* --model of vram train and vram plan: a preset ("tiny", "gpt2", "gpt2-medium", "gpt2-large",
 * "gpt2-xl") or "gpt:LAYERSxWIDTH[xHEADS]" (model_spec.c). Returns 0 with cfg set, or 1 with a
 * message in err (may be NULL). */
int vram_cli_model_spec(const char *spec, vram_gpt_config *cfg, char *err, size_t cap);
/* --recompute of vram train and vram plan: "gelu,layernorm" (the default), "gelu", "layernorm",
 * "none" or "block" into VRAM_GPT_KEEP_* bits and the checkpoint switch (model_spec.c). Returns
 * 0, or 1 when the value is none of them. */
int vram_cli_recompute(const char *v, int *keep, int *checkpoint);
/* --residual of vram train and vram plan: "fp32" (1: the residual stream stays f32 under mixed
 * precision, vram_gpt_config.residual_f32) or "lowp" (0: 16-bit). Returns 0, or 1 when neither. */
int vram_cli_residual(const char *v, int *f32);
/* --lowp-weights of vram train and vram plan: "cast" (0, each product casts its weight) or
 * "keep" (1, a 16-bit copy of every weight is kept). Returns 0, or 1 when it is neither. */
int vram_cli_lowp_weights(const char *v, int *keep);
/* --activation of vram train and vram plan: "gelu_tanh" (VRAM_ACT_GELU_TANH, GPT-2's) or
 * "gelu_erf" (VRAM_ACT_GELU_ERF). Returns 0, or 1 when it is neither. */
int vram_cli_activation(const char *v, int *act);
/* The categories in report order: tag, label and JSON key (plan_oom.c). */
typedef struct vram_cli_category {
    vram_tag tag;
    const char *label, *key;
} vram_cli_category;
enum { VRAM_CLI_CATEGORIES = 6 };
extern const vram_cli_category vram_cli_categories[VRAM_CLI_CATEGORIES];
/* Prints the bytes by category of a moment on one line. */
void vram_cli_print_moment(FILE *out, const vram_plan_moment *m);
/* The out-of-memory explanation: categories and reserved-but-free memory at the failure `at`,
 * and each remedy for configuration `c` planned at its capacity, or instead of them the reason
 * `no_remedies` gives (e.g. vram_cli_model_too_big for a failure while creating the model).
 * Returns 0, or 1 when the remedies could not be planned (said on `out`). */
int vram_cli_explain_oom(FILE *out, const char *tool, const vram_plan_moment *at, const vram_plan_config *c,
                         const char *no_remedies);
extern const char *const vram_cli_model_too_big;
/* The name of `names` nearest to a mistyped `word`, or NULL when none is close (suggest.c). */
const char *vram_cli_nearest(const char *word, const char *const *names, size_t count);
/* Prints "TOOL: unknown WHAT 'WORD'; did you mean 'NAME'? (see HELP)" to stderr, the suggestion
 * only when one is close and the "(see ...)" only when `help` is not NULL. */
void vram_cli_unknown(const char *tool, const char *what, const char *word, const char *const *names, size_t count,
                      const char *help);

#endif
