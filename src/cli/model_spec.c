/* model_spec.c — the model spec string of `vram plan --model`: "gpt:LAYERSxWIDTH[xHEADS]".
 *
 * A compact form of vram train's --layers, --width and --heads ("gpt:12x768x12" is GPT-2 small's
 * shape; its context is --context 1024). Numbers are bounded as vram train bounds its flags, so
 * a spec that parses is a model vram train accepts; a bad one is one message naming the spec.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* One decimal field ending at `stop` (or the string's end); advances *p past it. */
static int field(const char **p, char stop, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(*p, &end, 10);
    if (end == *p || errno || v < lo || v > hi || (*end && *end != stop) || (**p == '-' || **p == '+')) return 0;
    *out = v;
    *p = *end ? end + 1 : end;
    return 1;
}

int vram_cli_model_spec(const char *spec, vram_gpt_config *cfg, char *err, size_t cap) {
    if (!spec || strncmp(spec, "gpt:", 4)) {
        snprintf(err, cap, "model '%s' is not gpt:LAYERSxWIDTH[xHEADS] (e.g. gpt:4x128 or gpt:12x768x12)", spec ? spec : "");
        return 1;
    }
    const char *p = spec + 4;
    long layers, width, heads = cfg->heads;
    if (!field(&p, 'x', 1, 4096, &layers) || !*p || !field(&p, 'x', 1, 1 << 20, &width) ||
        (*p && !field(&p, '\0', 1, 4096, &heads)) || *p || spec[strlen(spec) - 1] == 'x') {
        snprintf(err, cap, "model '%s' is not gpt:LAYERSxWIDTH[xHEADS] with layers and heads in [1, 4096], width in "
                           "[1, 1048576]", spec);
        return 1;
    }
    if (width % heads) {
        snprintf(err, cap, "model '%s': width %ld is not a multiple of %ld heads", spec, width, heads);
        return 1;
    }
    cfg->layers = (int)layers;
    cfg->width = (int)width;
    cfg->heads = (int)heads;
    return 0;
}
