/* version.c — `vram version`: the version and the build's optional features. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define VRAM_VERSION "0.1.0"

int vram_cmd_version(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: vram version\n\nPrints vram's version.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "vram version: takes no arguments, not '%s'\n", argv[1]);
        return 2;
    }
    printf("vram %s\n", VRAM_VERSION);
    return 0;
}
