/* main.c — the `vram` command: finds the subcommand by name in a table and runs it, then makes
 * sure its output reached stdout (a full disk or a closed pipe is an error, not a lost report).
 * `vram --version` and `vram -V` are `vram version`; a mistyped command gets the nearest name. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"version", vram_cmd_version, "print the version"},
    {"smi", vram_cmd_smi, "GPU memory per device and process: table, CSV, JSON lines, Prometheus"},
    {"replay", vram_cmd_replay, "replay allocation traces through the allocator"},
    {"bench", vram_cmd_bench, "allocator benchmarks (vram bench alloc)"},
    {"viz", vram_cmd_viz, "draw memory over time from traces or snapshots as one HTML page"},
    {"train", vram_cmd_train, "train a GPT on a text corpus on the CPU, with a memory report by category"},
    {"plan", vram_cmd_plan, "predict vram train's memory by category, the largest batch that fits"},
    {"generate", vram_cmd_generate, "sample text from a saved model with a KV cache (f32, bf16 or INT8 weights)"},
    {"quantize", vram_cmd_quantize, "write a model file's matrices as INT8 (Q8_0 or per channel) or bf16"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: vram COMMAND [ARGS]\n       vram --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n'vram COMMAND --help' describes each command.\n");
}

/* rc, or 1 when it is 0 but stdout could not be written (a failed command has said why). */
static int flushed(const char *command, int rc) {
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "vram %s: writing the output failed: %s\n", command, errno ? strerror(errno) : "write error");
        return 1;
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return flushed(argv[1], 0);
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        argv[1] = "version";
    }
    enum { NCOMMANDS = sizeof commands / sizeof commands[0] };
    const char *names[NCOMMANDS + 2] = {[NCOMMANDS] = "--version", [NCOMMANDS + 1] = "--help"};
    for (size_t i = 0; i < NCOMMANDS; i++) {
        names[i] = commands[i].name;
        if (strcmp(argv[1], commands[i].name)) continue;
        return flushed(argv[1], commands[i].run(argc - 1, argv + 1));
    }
    vram_cli_unknown("vram", argv[1][0] == '-' ? "option" : "command", argv[1], names, NCOMMANDS + 2, "vram --help");
    return 2;
}
