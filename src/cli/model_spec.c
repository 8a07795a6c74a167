/* model_spec.c — the --model argument of `vram train` and `vram plan`: a preset name or a spec.
 *
 * Presets: "tiny" (the default: 4 layers, 4 heads, width 128, context 64, vocabulary 256) and
 * GPT-2's sizes ("gpt2" 124M, "gpt2-medium", "gpt2-large", "gpt2-xl": tied embedding, GPT-2's
 * initialisation, vocabulary 50257, context 1024, GPT-2's own tanh GELU; --activation gelu_erf for
 * PyTorch's default; "tiny" and specs without a preset keep erf's). A
 * spec "gpt:LAYERSxWIDTH[xHEADS]" sets those fields of the model given so far (heads otherwise
 * as they were). Numbers are bounded as vram train bounds its flags. The dropout given before
 * --model is kept; later flags change single fields. A bad argument is one message naming it.
 * Also --recompute, --lowp-weights and --activation's values, which both commands share.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    vram_gpt_config cfg;
} presets[] = {
#define GPT2_PRESET(L, H, C)                                                                                  \
    {.layers = L, .heads = H, .width = C, .vocab = 50257, .context = 1024, .tied = 1, .init_std = 0.02,           \
     .activation = VRAM_ACT_GELU_TANH}
    {"tiny", {.layers = 4, .heads = 4, .width = 128, .vocab = 256, .context = 64}},
    {"gpt2", GPT2_PRESET(12, 12, 768)},
    {"gpt2-medium", GPT2_PRESET(24, 16, 1024)},
    {"gpt2-large", GPT2_PRESET(36, 20, 1280)},
    {"gpt2-xl", GPT2_PRESET(48, 25, 1600)},
#undef GPT2_PRESET
};

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

static int say(char *err, size_t cap, const char *spec, const char *why) {
    if (err && cap) snprintf(err, cap, "model '%s' %s", spec, why);
    return 1;
}

int vram_cli_recompute(const char *v, int *keep, int *checkpoint) {
    int gelu = !strcmp(v, "gelu") || !strcmp(v, "gelu,layernorm") || !strcmp(v, "layernorm,gelu");
    int ln = !strcmp(v, "layernorm") || !strcmp(v, "gelu,layernorm") || !strcmp(v, "layernorm,gelu");
    int block = !strcmp(v, "block");
    if (!gelu && !ln && !block && strcmp(v, "none")) return 1;
    *keep = (block || gelu ? 0 : VRAM_GPT_KEEP_GELU) | (block || ln ? 0 : VRAM_GPT_KEEP_LAYERNORM);
    if (block) *checkpoint = 1;
    return 0;
}

int vram_cli_residual(const char *v, int *f32) {
    if (strcmp(v, "fp32") && strcmp(v, "lowp")) return 1;
    *f32 = !strcmp(v, "fp32");
    return 0;
}

int vram_cli_lowp_weights(const char *v, int *keep) {
    if (strcmp(v, "cast") && strcmp(v, "keep")) return 1;
    *keep = !strcmp(v, "keep");
    return 0;
}

int vram_cli_activation(const char *v, int *act) {
    if (strcmp(v, "gelu_tanh") && strcmp(v, "gelu_erf")) return 1;
    *act = !strcmp(v, "gelu_tanh") ? VRAM_ACT_GELU_TANH : VRAM_ACT_GELU_ERF;
    return 0;
}

int vram_cli_model_spec(const char *spec, vram_gpt_config *cfg, char *err, size_t cap) {
    if (!spec) return say(err, cap, "", "is empty");
    for (size_t k = 0; k < sizeof presets / sizeof *presets; k++) {
        if (strcmp(spec, presets[k].name)) continue;
        double dropout = cfg->dropout;
        *cfg = presets[k].cfg;
        cfg->dropout = dropout;
        return 0;
    }
    if (strncmp(spec, "gpt:", 4)) {
        if (err && cap)
            snprintf(err, cap, "unknown model '%s' (tiny, gpt2, gpt2-medium, gpt2-large, gpt2-xl) and not "
                               "gpt:LAYERSxWIDTH[xHEADS]", spec);
        return 1;
    }
    const char *p = spec + 4;
    long layers, width, heads = cfg->heads;
    if (!field(&p, 'x', 1, 4096, &layers) || !*p || !field(&p, 'x', 1, 1 << 20, &width) ||
        (*p && !field(&p, '\0', 1, 4096, &heads)) || *p || spec[strlen(spec) - 1] == 'x')
        return say(err, cap, spec, "is not gpt:LAYERSxWIDTH[xHEADS] with layers and heads in [1, 4096], width in [1, 1048576]");
    if (width % heads) {
        if (err && cap) snprintf(err, cap, "model '%s': width %ld is not a multiple of %ld heads", spec, width, heads);
        return 1;
    }
    cfg->layers = (int)layers;
    cfg->width = (int)width;
    cfg->heads = (int)heads;
    return 0;
}
