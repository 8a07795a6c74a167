/* version.c — `vram version`: the version and the build's optional features. */
#include <stdio.h>

#include "cli.h"

#define VRAM_VERSION "0.1.0"

int vram_cmd_version(int argc, char **argv) {
    if (argc > 1) {
        fprintf(stderr, "vram version: takes no arguments, not '%s'\n", argv[1]);
        return 2;
    }
    printf("vram %s\n", VRAM_VERSION);
    return 0;
}
