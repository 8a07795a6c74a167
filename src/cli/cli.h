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

/* 0 when VRAM_ALLOC_CONF and the --conf string (NULL: none) parse; else prints the error as
 * "TOOL: ..." and returns 2 (conf_check.c). */
int vram_cli_check_conf(const char *tool, const char *conf);

/* The name of `names` nearest to a mistyped `word`, or NULL when none is close (suggest.c). */
const char *vram_cli_nearest(const char *word, const char *const *names, size_t count);
/* Prints "TOOL: unknown WHAT 'WORD'; did you mean 'NAME'? (see HELP)" to stderr, the suggestion
 * only when one is close and the "(see ...)" only when `help` is not NULL. */
void vram_cli_unknown(const char *tool, const char *what, const char *word, const char *const *names, size_t count,
                      const char *help);

#endif
