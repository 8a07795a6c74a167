/* cli.h — the subcommands of the `vram` command. Each lives in src/cli/<name>.c, takes the
 * arguments after its name (argv[0] is the subcommand name) and returns the process exit
 * status: 0 success, 1 a failed run (e.g. out of memory in a replay), 2 bad input or usage.
 */
#ifndef VRAM_CLI_H
#define VRAM_CLI_H

int vram_cmd_version(int argc, char **argv);
int vram_cmd_smi(int argc, char **argv);
int vram_cmd_replay(int argc, char **argv);
int vram_cmd_bench(int argc, char **argv);
int vram_cmd_train(int argc, char **argv);
int vram_cmd_viz(int argc, char **argv);

/* 0 when VRAM_ALLOC_CONF and the --conf string (NULL: none) parse; else prints the error as
 * "TOOL: ..." and returns 2 (conf_check.c). */
int vram_cli_check_conf(const char *tool, const char *conf);

#endif
