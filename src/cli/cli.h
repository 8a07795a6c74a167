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

#endif
