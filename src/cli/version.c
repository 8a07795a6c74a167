/* version.c — `vram version`: the version and the build's optional features. */
#include <stdio.h>

#include "cli.h"

#define VRAM_VERSION "0.1.0"

int vram_cmd_version(int argc, char **argv) {
    (void)argc; (void)argv;
    printf("vram %s\n", VRAM_VERSION);
    return 0;
}
