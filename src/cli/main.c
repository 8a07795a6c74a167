/* main.c — the `vram` command: finds the subcommand by name in a table and runs it, then makes
 * sure its output reached stdout (a full disk or a closed pipe is an error, not a lost report). */
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
};

static void usage(FILE *out) {
    fprintf(out, "usage: vram COMMAND [ARGS]\n\ncommands:\n");
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
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name)) continue;
        return flushed(argv[1], commands[i].run(argc - 1, argv + 1));
    }
    fprintf(stderr, "vram: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
