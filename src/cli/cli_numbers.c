/* cli_numbers.c — the number flags of the vram commands: a whole decimal within bounds, or one
 * message naming the command, the flag, the bounds and what was given. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int vram_cli_number(const char *tool, const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "vram %s: %s needs a number in [%.15g, %.15g], not '%s'\n", tool, flag, lo, hi, v);
        return 0;
    }
    *out = x;
    return 1;
}

int vram_cli_integer(const char *tool, const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "vram %s: %s needs an integer in [%d, %d], not '%s'\n", tool, flag, lo, hi, v);
        return 0;
    }
    *out = (int)x;
    return 1;
}
