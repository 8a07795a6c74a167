/* gpt_file.c — the GPT of nn.h to and from a .vram model file: weights, and for a training
 * checkpoint the optimizer state, step and random state (model_file.h).
 *
 * A parameter is saved under its parameter-list name with role PARAM and the optimizer's step
 * count for it; its optimizer state tensors under the same name with roles OPT1 and OPT2. The
 * random state is the runtime's: it decides both the dropout masks and the data batches (their
 * offsets are drawn from it), so restoring it restores the data position too. Loading checks the
 * file against the model tensor by tensor (name, shape, format) and fails on anything left over,
 * so a file of another shape or architecture is an error naming the first difference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "vram/model_file.h"

void vram_model_info_from_gpt(vram_model_info *info, const vram_gpt_config *cfg) {
    memset(info, 0, sizeof *info);
    snprintf(info->arch, sizeof info->arch, "gpt2");
    info->gpt = *cfg;
    info->activation = cfg->activation;
}

vram_status vram_model_info_check(const vram_model_info *in, const char *path) {
    if (strcmp(in->arch, "gpt2"))
        return vram_error(VRAM_ERR_UNSUPPORTED, "model '%s' is architecture '%.15s'; this vram runs 'gpt2'", path, in->arch);
    const vram_gpt_config *c = &in->gpt;
    if (c->layers < 1 || c->heads < 1 || c->width < 1 || c->vocab < 1 || c->context < 1 || c->width % c->heads ||
        c->layers > 4096 || c->width > (1 << 20) || c->vocab > (1 << 24) || c->context > (1 << 20) ||
        (in->activation != VRAM_ACT_GELU_ERF && in->activation != VRAM_ACT_GELU_TANH))
        return vram_error(VRAM_ERR_PARSE, "model '%s': bad shape (layers %d, heads %d, width %d, vocab %d, context %d, activation %d)",
                          path, c->layers, c->heads, c->width, c->vocab, c->context, in->activation);
    return VRAM_OK;
}

/* t's bytes where the host can read them: its own memory on the CPU, else a copy in *stage
 * (grown as needed; the caller frees it). NULL, with *s set, when the host has no memory. */
static const void *host_bytes(vram_tensor *t, float **stage, vram_status *s) {
    if (!vram_runtime_on_gpu(vram_tensor_runtime(t))) return vram_tensor_data(t);
    float *b = realloc(*stage, (size_t)vram_tensor_numel(t) * 4 + 4);
    if (!b) {
        *s = vram_error(VRAM_ERR_HOST_MEMORY, "saving a model: out of host memory");
        return NULL;
    }
    *stage = b;
    vram_tensor_read_host(t, b);
    return b;
}

vram_status vram_gpt_save(const char *path, vram_gpt *g, vram_optimizer *opt, const vram_train_state *ts) {
    if (!path || !g) return vram_error(VRAM_ERR_INVALID_ARG, "gpt save: null argument");
    vram_param_list *params = vram_gpt_params(g);
    vram_model_info info;
    vram_model_info_from_gpt(&info, vram_gpt_get_config(g));
    if (opt && ts) {
        info.flags |= VRAM_MF_TRAINING;
        info.step = ts->step;
        info.data_bytes = ts->data_bytes;
        info.optim = *vram_optimizer_config(opt);
        vram_runtime_rng_get(vram_tensor_runtime(vram_param_list_get(params, 0)), info.rng);
    }
    vram_model_writer *w = NULL;
    vram_status s = vram_model_writer_open(path, &info, &w);
    float *stage = NULL; /* a tensor's bytes read back to the host, where they live on a GPU */
    for (int i = 0; i < vram_param_list_count(params) && s == VRAM_OK; i++) {
        vram_tensor *p = vram_param_list_get(params, i), *st[2] = {NULL, NULL};
        const char *name = vram_param_list_name(params, i);
        int64_t step = 0;
        if (opt && ts) vram_optimizer_state(opt, i, &step, &st[0], &st[1]);
        const void *bytes = host_bytes(p, &stage, &s);
        if (bytes)
            s = vram_model_writer_add(w, name, VRAM_MF_ROLE_PARAM, VRAM_WFMT_F32, p->ndim, p->shape, step, bytes,
                                      (uint64_t)vram_tensor_numel(p) * 4);
        for (int k = 0; k < 2 && s == VRAM_OK; k++)
            if (st[k] && (bytes = host_bytes(st[k], &stage, &s)) != NULL)
                s = vram_model_writer_add(w, name, VRAM_MF_ROLE_OPT1 + k, VRAM_WFMT_F32, p->ndim, p->shape, step, bytes,
                                          (uint64_t)vram_tensor_numel(p) * 4);
    }
    free(stage);
    if (!w) return s;
    vram_status c = vram_model_writer_close(w, s == VRAM_OK);
    return s != VRAM_OK ? s : c;
}

/* Reads entry (name, role) into t, which must match its shape; f32 only. */
static vram_status read_into(vram_model_file *f, const char *path, const char *name, int role, vram_tensor *t, int *used) {
    int i = vram_model_file_find(f, name, role);
    if (i < 0)
        return vram_error(VRAM_ERR_PARSE, "model '%s' has no tensor '%s'%s (another architecture or shape?)", path, name,
                          role == VRAM_MF_ROLE_PARAM ? "" : " optimizer state");
    vram_model_entry e;
    vram_model_file_entry(f, i, &e);
    int same = e.ndim == t->ndim;
    for (int d = 0; same && d < e.ndim; d++) same = e.shape[d] == t->shape[d];
    if (!same || e.fmt != VRAM_WFMT_F32) {
        char a[96], b[96];
        return vram_error(VRAM_ERR_PARSE, "model '%s': tensor '%s' is %s %s, the model's is f32 %s", path, name,
                          vram_wfmt_name(e.fmt), vram_shape_str(e.ndim, e.shape, a, sizeof a), SHAPE_STR(t, b));
    }
    used[i] = 1;
    if (!vram_runtime_on_gpu(vram_tensor_runtime(t)))
        return vram_model_file_read(f, i, vram_tensor_data(t), vram_tensor_storage_bytes(t));
    float *b = malloc((size_t)vram_tensor_numel(t) * 4 + 4); /* through the host to the GPU */
    if (!b) return vram_error(VRAM_ERR_HOST_MEMORY, "loading a model: out of host memory");
    vram_status s = vram_model_file_read(f, i, b, (size_t)vram_tensor_numel(t) * 4);
    if (s == VRAM_OK) vram_tensor_write_host(t, b);
    free(b);
    return s;
}

/* Loads every parameter (and, with opt, its optimizer state) and checks nothing is left over. */
static vram_status load_tensors(vram_model_file *f, const char *path, vram_gpt *g, vram_optimizer *opt) {
    vram_param_list *params = vram_gpt_params(g);
    int n = vram_model_file_count(f);
    int *used = calloc((size_t)n + 1, sizeof *used);
    if (!used) return vram_error(VRAM_ERR_HOST_MEMORY, "model load: out of host memory");
    vram_status s = VRAM_OK;
    for (int i = 0; i < vram_param_list_count(params) && s == VRAM_OK; i++) {
        const char *name = vram_param_list_name(params, i);
        s = read_into(f, path, name, VRAM_MF_ROLE_PARAM, vram_param_list_get(params, i), used);
        if (s != VRAM_OK || !opt) continue;
        vram_model_entry e;
        vram_model_file_entry(f, vram_model_file_find(f, name, VRAM_MF_ROLE_PARAM), &e);
        vram_tensor *st[2] = {NULL, NULL};
        s = vram_optimizer_state_prepare(opt, i, e.step, &st[0], &st[1]);
        for (int k = 0; k < 2 && s == VRAM_OK; k++)
            if (st[k]) s = read_into(f, path, name, VRAM_MF_ROLE_OPT1 + k, st[k], used);
    }
    for (int i = 0; i < n && s == VRAM_OK; i++) {
        vram_model_entry e;
        vram_model_file_entry(f, i, &e);
        if (!used[i] && (e.role == VRAM_MF_ROLE_PARAM || opt))
            s = vram_error(VRAM_ERR_PARSE, "model '%s' has a tensor '%s' this GPT does not (another architecture?)", path, e.name);
    }
    free(used);
    return s;
}

static vram_status open_checked(const char *path, vram_model_file **f) {
    vram_status s = vram_model_file_open(path, f);
    if (s == VRAM_OK) s = vram_model_info_check(vram_model_file_info(*f), path);
    if (s == VRAM_OK && (vram_model_file_info(*f)->flags & VRAM_MF_QUANTIZED))
        s = vram_error(VRAM_ERR_UNSUPPORTED, "model '%s' is quantized: it can generate (vram generate) but not train", path);
    if (s != VRAM_OK) {
        vram_model_file_close(*f);
        *f = NULL;
    }
    return s;
}

vram_status vram_gpt_load(vram_runtime *rt, const char *path, vram_gpt **out, uint64_t *bytes_read) {
    if (!rt || !path || !out) return vram_error(VRAM_ERR_INVALID_ARG, "gpt load: null argument");
    vram_model_file *f = NULL;
    vram_gpt *g = NULL;
    vram_status s = open_checked(path, &f);
    if (s == VRAM_OK) s = vram_gpt_new(rt, &vram_model_file_info(f)->gpt, &g);
    if (s == VRAM_OK) s = load_tensors(f, path, g, NULL);
    if (s == VRAM_OK && bytes_read) *bytes_read = vram_model_file_bytes_read(f);
    vram_model_file_close(f);
    if (s != VRAM_OK) {
        vram_gpt_free(g);
        return s;
    }
    *out = g;
    return VRAM_OK;
}

vram_status vram_gpt_resume(const char *path, vram_gpt *g, vram_optimizer *opt, vram_train_state *ts,
                            uint64_t *bytes_read) {
    if (!path || !g || !opt || !ts) return vram_error(VRAM_ERR_INVALID_ARG, "gpt resume: null argument");
    vram_model_file *f = NULL;
    vram_status s = open_checked(path, &f);
    if (s != VRAM_OK) return s;
    const vram_model_info *in = vram_model_file_info(f);
    const vram_gpt_config *c = vram_gpt_get_config(g), *fc = &in->gpt;
    const vram_optim_config *oc = vram_optimizer_config(opt);
    if (!(in->flags & VRAM_MF_TRAINING))
        s = vram_error(VRAM_ERR_PARSE, "model '%s' holds weights only (no optimizer state, step or random state): it "
                       "cannot be resumed", path);
    else if (c->layers != fc->layers || c->heads != fc->heads || c->width != fc->width || c->vocab != fc->vocab ||
             c->context != fc->context)
        s = vram_error(VRAM_ERR_INVALID_ARG, "model '%s' is %d layers, %d heads, width %d, context %d; this run's model is "
                       "%d, %d, %d, %d", path, fc->layers, fc->heads, fc->width, fc->context, c->layers, c->heads, c->width,
                       c->context);
    else if (c->activation != in->activation)
        s = vram_error(VRAM_ERR_INVALID_ARG, "model '%s' uses the %s GELU; this run's model the %s GELU (vram train: "
                       "--activation %s)", path, in->activation == VRAM_ACT_GELU_TANH ? "tanh" : "erf",
                       c->activation == VRAM_ACT_GELU_TANH ? "tanh" : "erf",
                       in->activation == VRAM_ACT_GELU_TANH ? "gelu_tanh" : "gelu_erf");
    else if (in->optim.kind != oc->kind || (in->optim.momentum > 0) != (oc->momentum > 0))
        s = vram_error(VRAM_ERR_INVALID_ARG, "model '%s' was trained with %s%s; this run uses %s%s", path,
                       vram_optim_kind_name(in->optim.kind), in->optim.momentum > 0 ? " (momentum)" : "",
                       vram_optim_kind_name(oc->kind), oc->momentum > 0 ? " (momentum)" : "");
    else if (in->data_bytes != ts->data_bytes)
        s = vram_error(VRAM_ERR_INVALID_ARG, "model '%s' was trained on a %llu-byte corpus; this run's is %llu bytes", path,
                       (unsigned long long)in->data_bytes, (unsigned long long)ts->data_bytes);
    if (s == VRAM_OK) s = load_tensors(f, path, g, opt);
    if (s == VRAM_OK) {
        vram_runtime_rng_set(vram_tensor_runtime(vram_param_list_get(vram_gpt_params(g), 0)), in->rng);
        ts->step = in->step;
        if (bytes_read) *bytes_read = vram_model_file_bytes_read(f);
    }
    vram_model_file_close(f);
    return s;
}
