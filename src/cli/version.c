/* version.c — `vram version`: the version (the project's, from CMakeLists.txt). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifndef VRAM_VERSION
#error "VRAM_VERSION comes from CMakeLists.txt's project(VERSION)"
#endif

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
