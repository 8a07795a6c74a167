/* bench_gpt2_reference.c — the runtime's side of the check against PyTorch (bench/gpt2_torch.py
 * check): trains a GPT-2-shaped model (tied embedding, GPT-2 initialisation, AdamW, global-norm
 * clipping) on random token ids and writes into DIR what PyTorch needs to repeat the run:
 *
 *   params.txt   one line per parameter: name and shape (d0,d1,...), in order
 *   init.bin     the initial parameters, f32, concatenated in that order
 *   batches.bin  every step's tokens, i32 [steps][batch][context + 1] (ids, then targets shifted)
 *   grads1.bin   the gradients of the first step's backward (before clipping), f32
 *   losses.txt   one loss per step, %.9g
 *   activation.txt  gelu_tanh or gelu_erf: the MLP's GELU
 *
 * usage: bench_gpt2_reference --out DIR [--device cuda:0] [--steps 20] [--batch 8] [--context 1024]
 *        [--layers 12 --heads 12 --width 768 --vocab 50257] [--lr 3e-4] [--clip 1.0] [--seed 1337]
 *        [--precision fp32|bf16|fp16] [--data FILE] [--activation gelu_tanh|gelu_erf]
 * The GELU is GPT-2's tanh form by default (vram train --model gpt2's).
 * --precision bf16/fp16 trains with mixed precision (fp16 with the dynamic loss scaler); --data
 * takes the batches from windows of a file's bytes (a learnable text, not random ids). --residual
 * fp32 keeps mixed precision's residual stream f32 (vram_gpt_config.residual_f32; lowp, the
 * default, keeps it 16-bit).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>

#include "vram/alloc.h"
#include "vram/nn.h"
#include "vram/optim.h"

static int write_file(const char *dir, const char *name, const void *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "bench_gpt2_reference: cannot write %s: %s\n", path, strerror(errno));
        return 0;
    }
    return 1;
}

/* All parameters (or their gradients) as one f32 array. */
static float *gather(vram_param_list *pl, int grads, size_t *bytes) {
    int64_t total = vram_param_list_numel(pl), at = 0;
    float *buf = calloc((size_t)total, sizeof *buf);
    for (int i = 0; buf && i < vram_param_list_count(pl); i++) {
        vram_tensor *p = vram_param_list_get(pl, i), *t = grads ? vram_tensor_grad(p) : p;
        if (t) vram_tensor_read_host(t, buf + at);
        at += vram_tensor_numel(p);
    }
    *bytes = (size_t)total * sizeof *buf;
    return buf;
}

int main(int argc, char **argv) {
    const char *out = NULL, *device = "cuda:0";
    int steps = 20, batch = 8;
    vram_gpt_config cfg = {.layers = 12, .heads = 12, .width = 768, .vocab = 50257, .context = 1024, .tied = 1,
                           .init_std = 0.02, .activation = VRAM_ACT_GELU_TANH}; /* vram train's gpt2 */
    double lr = 3e-4, clip = 1.0;
    unsigned long long seed = 1337;
    const char *data = NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        i++;
        if (!strcmp(f, "--out")) out = v;
        else if (!strcmp(f, "--device")) device = v;
        else if (!strcmp(f, "--steps")) steps = atoi(v);
        else if (!strcmp(f, "--batch")) batch = atoi(v);
        else if (!strcmp(f, "--context")) cfg.context = atoi(v);
        else if (!strcmp(f, "--layers")) cfg.layers = atoi(v);
        else if (!strcmp(f, "--heads")) cfg.heads = atoi(v);
        else if (!strcmp(f, "--width")) cfg.width = atoi(v);
        else if (!strcmp(f, "--vocab")) cfg.vocab = atoi(v);
        else if (!strcmp(f, "--lr")) lr = atof(v);
        else if (!strcmp(f, "--residual") && (!strcmp(v, "fp32") || !strcmp(v, "lowp"))) cfg.residual_f32 = !strcmp(v, "fp32");
        else if (!strcmp(f, "--clip")) clip = atof(v);
        else if (!strcmp(f, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(f, "--data")) data = v;
        else if (!strcmp(f, "--activation")) {
            if (!strcmp(v, "gelu_tanh")) cfg.activation = VRAM_ACT_GELU_TANH;
            else if (!strcmp(v, "gelu_erf")) cfg.activation = VRAM_ACT_GELU_ERF;
            else goto usage;
        }
        else if (!strcmp(f, "--precision")) {
            if (!strcmp(v, "bf16")) cfg.precision = VRAM_DTYPE_BF16;
            else if (!strcmp(v, "fp16")) cfg.precision = VRAM_DTYPE_F16;
            else if (strcmp(v, "fp32")) goto usage;
        }
        else goto usage;
    }
    if (!out || steps < 1 || batch < 1 || cfg.context < 1) goto usage;
    mkdir(out, 0755);
    struct utsname u;
    uname(&u);
    printf("# machine: %s %s\n# command:", u.nodename, u.machine);
    for (int i = 0; i < argc; i++) printf(" %s", argv[i]);
    printf("\n");

    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    vram_runtime *rt = NULL;
    vram_gpt *g = NULL;
    vram_optimizer *opt = NULL;
    vram_grad_scaler *scaler = NULL;
    vram_status s = vram_device_open(device, &dev);
    if (s == VRAM_OK) s = vram_allocator_new(dev, NULL, &a);
    if (s == VRAM_OK) s = vram_runtime_new(a, 0, &rt);
    if (s == VRAM_OK) vram_runtime_seed(rt, seed);
    if (s == VRAM_OK) s = vram_gpt_new(rt, &cfg, &g);
    vram_optim_config oc;
    vram_optim_config_default(VRAM_OPTIM_ADAMW, &oc);
    oc.lr = lr;
    if (s == VRAM_OK) s = vram_optimizer_new(rt, vram_gpt_params(g), &oc, &opt);
    if (s == VRAM_OK && cfg.precision == VRAM_DTYPE_F16) s = vram_grad_scaler_new(rt, opt, NULL, &scaler);
    if (s != VRAM_OK) {
        fprintf(stderr, "bench_gpt2_reference: %s: %s\n", vram_status_str(s), vram_last_error());
        return 1;
    }
    vram_param_list *pl = vram_gpt_params(g);
    FILE *names = NULL;
    {
        char path[4096];
        snprintf(path, sizeof path, "%s/params.txt", out);
        names = fopen(path, "w");
    }
    for (int i = 0; names && i < vram_param_list_count(pl); i++) {
        vram_tensor *p = vram_param_list_get(pl, i);
        fprintf(names, "%s ", vram_param_list_name(pl, i));
        for (int d = 0; d < vram_tensor_ndim(p); d++) fprintf(names, "%s%lld", d ? "," : "", (long long)vram_tensor_shape(p)[d]);
        fprintf(names, "\n");
    }
    if (!names || fclose(names) != 0) return fprintf(stderr, "bench_gpt2_reference: cannot write params.txt\n"), 1;
    const char *act = cfg.activation == VRAM_ACT_GELU_TANH ? "gelu_tanh\n" : "gelu_erf\n";
    if (!write_file(out, "activation.txt", act, strlen(act))) return 1;
    size_t bytes;
    float *init = gather(pl, 0, &bytes);
    if (!init || !write_file(out, "init.bin", init, bytes)) return 1;
    free(init);

    int64_t T1 = cfg.context + 1, per = (int64_t)batch * T1;
    int32_t *tokens = malloc(sizeof *tokens * (size_t)(per * steps)), *ids = malloc(sizeof *ids * (size_t)batch * cfg.context),
            *tg = malloc(sizeof *tg * (size_t)batch * cfg.context);
    uint64_t x = seed * 2654435761u + 1;
    unsigned char *text = NULL;
    long text_n = 0;
    if (data) {
        FILE *tf = fopen(data, "rb");
        if (tf && !fseek(tf, 0, SEEK_END) && (text_n = ftell(tf)) > T1 && !fseek(tf, 0, SEEK_SET) &&
            (text = malloc((size_t)text_n)) && fread(text, 1, (size_t)text_n, tf) == (size_t)text_n) {
        } else {
            return fprintf(stderr, "bench_gpt2_reference: cannot read --data %s (or shorter than the context)\n", data), 1;
        }
        fclose(tf);
    }
    for (int64_t r = 0; r < (int64_t)steps * batch; r++) { /* one row of T + 1 tokens */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t start = text ? (int64_t)(x % (uint64_t)(text_n - T1)) : 0;
        for (int64_t t = 0; t < T1; t++) {
            if (text) {
                tokens[r * T1 + t] = text[start + t];
                continue;
            }
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            tokens[r * T1 + t] = (int32_t)(x % (uint64_t)cfg.vocab);
        }
    }
    free(text);
    if (!write_file(out, "batches.bin", tokens, sizeof *tokens * (size_t)(per * steps))) return 1;
    double *losses = calloc((size_t)steps, sizeof *losses);
    int64_t shape[2] = {batch, cfg.context};
    for (int step = 0; step < steps && s == VRAM_OK; step++) {
        for (int b = 0; b < batch; b++)
            for (int t = 0; t < cfg.context; t++) {
                ids[b * cfg.context + t] = tokens[step * per + b * T1 + t];
                tg[b * cfg.context + t] = tokens[step * per + b * T1 + t + 1];
            }
        vram_tensor *ti = NULL, *tt = NULL, *loss = NULL;
        vram_param_list_zero_grad(pl, 1);
        s = vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, ids, &ti);
        if (s == VRAM_OK) s = vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, tg, &tt);
        if (s == VRAM_OK) s = vram_gpt_forward(g, ti, tt, 1, NULL, &loss);
        if (s == VRAM_OK) losses[step] = vram_tensor_item(loss);
        if (s == VRAM_OK) s = vram_backward(loss, scaler ? vram_grad_scaler_seed(scaler) : NULL);
        if (s == VRAM_OK && scaler) s = vram_grad_scaler_unscale(scaler, pl); /* step 1's gradients unscaled */
        if (s == VRAM_OK && step == 0) {
            float *g1 = gather(pl, 1, &bytes);
            if (!g1 || !write_file(out, "grads1.bin", g1, bytes)) s = VRAM_ERR_IO;
            free(g1);
        }
        if (s == VRAM_OK && clip > 0) s = vram_clip_grad_norm(pl, clip, NULL);
        if (s == VRAM_OK) s = vram_optimizer_step(opt);
        int skipped = 0;
        if (s == VRAM_OK && scaler) s = vram_grad_scaler_update(scaler, &skipped);
        if (s == VRAM_OK && skipped) printf("step %2d skipped (inf/NaN gradients), scale now %g\n", step + 1,
                                            vram_grad_scaler_scale(scaler));
        if (s == VRAM_OK) s = vram_runtime_sync(rt);
        vram_tensor_free(ti);
        vram_tensor_free(tt);
        vram_tensor_free(loss);
        if (s == VRAM_OK) printf("step %2d loss %.6f\n", step + 1, losses[step]);
    }
    if (s != VRAM_OK) {
        fprintf(stderr, "bench_gpt2_reference: training failed: %s: %s\n", vram_status_str(s), vram_last_error());
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/losses.txt", out);
    FILE *f = fopen(path, "w");
    for (int i = 0; f && i < steps; i++) fprintf(f, "%.9g\n", losses[i]);
    if (!f || fclose(f) != 0) return fprintf(stderr, "bench_gpt2_reference: cannot write losses.txt\n"), 1;
    free(losses);
    free(tokens);
    free(ids);
    free(tg);
    vram_grad_scaler_free(scaler);
    vram_optimizer_free(opt);
    vram_gpt_free(g);
    vram_runtime_free(rt);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return 0;
usage:
    fprintf(stderr, "usage: bench_gpt2_reference --out DIR [--device cuda:0] [--residual lowp|fp32] [--steps N] [--batch B] [--context T] "
                    "[--layers L --heads H --width C --vocab V] [--lr X] [--clip X] [--seed N] [--precision fp32|bf16|fp16] "
                    "[--data FILE] [--activation gelu_tanh|gelu_erf]\n");
    return 2;
}
