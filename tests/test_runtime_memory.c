/* test_runtime_memory.c — the memory mechanisms of the runtime, each asserted from the
 * allocator's per-tag statistics:
 *   - under no_grad a forward pass holds no activation memory, and once its output is
 *     consumed nothing but the parameters remains allocated;
 *   - backward frees the activations it consumes;
 *   - zero_grad(set_to_none) releases every gradient byte (in-place zeroing keeps them);
 *   - optimizer state: Adam/AdamW 2x the parameter bytes, Adagrad and momentum SGD 1x, SGD 0;
 *   - accumulating k micro-batches of size b peaks at the activation memory of b, not k*b, and
 *     gives the gradient of the whole batch;
 *   - checkpointing every block of a 12-layer GPT (with dropout) cuts peak activation memory
 *     by at least 60% and leaves every gradient bit-identical;
 *   - a batch that does not fit under a capacity fails with VRAM_ERR_OUT_OF_MEMORY, cleanly.
 * `test_runtime_memory cuda` runs the same assertions on the GPU (CTest: gpu_test_runtime_memory,
 * label gpu): there the kernels' scratch and cuBLASLt's workspace are tagged "other" and left out
 * of the totals, and gradients summed with atomics agree to rounding instead of bit for bit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "vram/alloc.h"
#include "vram/nn.h"
#include "vram/optim.h"

static vram_allocator *A;
static vram_runtime *rt;
static int on_gpu;

static int64_t tag_cur(vram_tag t) {
    vram_stats s;
    vram_allocator_get_stats(A, &s);
    return s.tags[t].allocated_bytes.current;
}
static int64_t tag_peak(vram_tag t) {
    vram_stats s;
    vram_allocator_get_stats(A, &s);
    return s.tags[t].allocated_bytes.peak;
}
/* Allocated bytes less the runtime's own ("other": the GPU's scratch and matmul workspace). */
static int64_t total_cur(void) {
    vram_stats s;
    vram_allocator_get_stats(A, &s);
    return s.allocated_bytes[VRAM_POOL_ALL].current - s.tags[VRAM_TAG_OTHER].allocated_bytes.current;
}

static void batch(int64_t b, int64_t t, uint64_t seed, vram_tensor **ids, vram_tensor **tg) {
    int32_t x[4096], y[4096];
    uint64_t s = seed;
    for (int64_t i = 0; i < b * t; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (int32_t)((s >> 33) % 256);
        y[i] = (int32_t)((s >> 45) % 256);
    }
    int64_t shape[2] = {b, t};
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, x, ids));
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, y, tg));
}

/* forward + backward of one batch; returns the loss */
static double train_pass(vram_gpt *g, int64_t b, int64_t t, uint64_t seed, double loss_scale) {
    vram_tensor *ids = NULL, *tg = NULL, *loss = NULL, *scaled = NULL;
    batch(b, t, seed, &ids, &tg);
    CHECK_OK(vram_gpt_forward(g, ids, tg, 1, NULL, &loss));
    double l = loss ? vram_tensor_item(loss) : NAN;
    if (loss_scale != 1.0) {
        CHECK_OK(vram_scale(loss, loss_scale, &scaled));
        CHECK_OK(vram_backward(scaled, NULL));
    } else if (loss) {
        CHECK_OK(vram_backward(loss, NULL));
    }
    vram_tensor_free(scaled);
    vram_tensor_free(loss);
    vram_tensor_free(ids);
    vram_tensor_free(tg);
    return l;
}

static vram_gpt *small_gpt(int layers, double dropout) {
    vram_gpt_config c = {.layers = layers, .heads = 2, .width = 32, .vocab = 256, .context = 16, .dropout = dropout};
    vram_gpt *g = NULL;
    vram_runtime_seed(rt, 7);
    CHECK_OK(vram_gpt_new(rt, &c, &g));
    return g;
}

/* The sum of |g| over every parameter's gradient (0 for parameters without one). */
static double grads_abs_sum(vram_param_list *pl) {
    double sum = 0;
    for (int i = 0; i < vram_param_list_count(pl); i++) {
        vram_tensor *p = vram_param_list_get(pl, i), *g = vram_tensor_grad(p);
        float *d = g ? malloc(sizeof *d * (size_t)vram_tensor_numel(p)) : NULL;
        if (d) vram_tensor_read_host(g, d);
        for (int64_t k = 0; d && k < vram_tensor_numel(p); k++) sum += d[k] < 0 ? -d[k] : d[k];
        free(d);
    }
    return sum;
}

static void test_no_grad_and_backward(void) {
    vram_gpt *g = small_gpt(2, 0);
    int64_t params = tag_cur(VRAM_TAG_PARAMETER);
    CHECK(params > 0 && total_cur() == params, "only parameters allocated at start (%lld of %lld)", (long long)params,
          (long long)total_cur());
    vram_tensor *ids = NULL, *tg = NULL, *loss = NULL;
    batch(4, 16, 1, &ids, &tg);
    vram_allocator_reset_peak_stats(A);
    vram_no_grad_enter();
    CHECK_OK(vram_gpt_forward(g, ids, tg, 1, NULL, &loss));
    vram_no_grad_exit();
    CHECK(tag_peak(VRAM_TAG_ACTIVATION) == 0, "no_grad forward saved %lld activation bytes", (long long)tag_peak(VRAM_TAG_ACTIVATION));
    CHECK(strcmp(vram_tensor_grad_fn_name(loss), "") == 0, "no_grad output has a grad_fn (%s)", vram_tensor_grad_fn_name(loss));
    vram_tensor_free(loss);
    loss = NULL;
    vram_tensor_free(ids);
    vram_tensor_free(tg);
    CHECK(total_cur() == params, "after the no_grad output is consumed: %lld bytes allocated, parameters %lld",
          (long long)total_cur(), (long long)params);

    /* The same forward with gradients keeps activations, and backward releases them. */
    batch(4, 16, 1, &ids, &tg);
    CHECK_OK(vram_gpt_forward(g, ids, tg, 1, NULL, &loss));
    int64_t act = tag_cur(VRAM_TAG_ACTIVATION);
    CHECK(act > 0, "a recorded forward holds activations (%lld)", (long long)act);
    CHECK_OK(vram_backward(loss, NULL));
    CHECK(vram_backward(loss, NULL) == VRAM_ERR_STATE, "a second backward through a consumed graph is refused");
    CHECK(strstr(vram_last_error(), "already consumed") != NULL, "detail: %s", vram_last_error());
    vram_tensor_free(loss);
    vram_tensor_free(ids);
    vram_tensor_free(tg);
    CHECK(tag_cur(VRAM_TAG_ACTIVATION) == 0, "backward left %lld activation bytes", (long long)tag_cur(VRAM_TAG_ACTIVATION));
    CHECK(tag_cur(VRAM_TAG_TEMPORARY) == 0, "backward left %lld temporary bytes", (long long)tag_cur(VRAM_TAG_TEMPORARY));
    printf("no_grad: activation peak 0; with grad: %lld activation bytes after forward, 0 after backward\n", (long long)act);

    /* zero_grad: every parameter has a gradient of its own size */
    vram_param_list *pl = vram_gpt_params(g);
    CHECK(tag_cur(VRAM_TAG_GRADIENT) == params, "gradient bytes %lld = parameter bytes %lld",
          (long long)tag_cur(VRAM_TAG_GRADIENT), (long long)params);
    double before = grads_abs_sum(pl);
    CHECK(before > 0, "backward left gradients to zero (sum of |g| %g)", before);
    vram_param_list_zero_grad(pl, 0);
    CHECK(tag_cur(VRAM_TAG_GRADIENT) == params, "in-place zero_grad keeps the gradient bytes");
    CHECK(grads_abs_sum(pl) == 0.0, "in-place zero_grad zeroes every gradient element (sum of |g| %g)",
          grads_abs_sum(pl));
    vram_param_list_zero_grad(pl, 1);
    CHECK(tag_cur(VRAM_TAG_GRADIENT) == 0, "zero_grad(set_to_none) left %lld gradient bytes", (long long)tag_cur(VRAM_TAG_GRADIENT));
    CHECK(total_cur() == params, "after zero_grad only parameters remain");
    vram_gpt_free(g);
    CHECK(total_cur() == 0, "model freed: %lld bytes left", (long long)total_cur());
}

static void test_optimizer_state(void) {
    static const struct {
        const char *name;
        int factor;
    } cases[] = {{"adam", 2}, {"adamw", 2}, {"adagrad", 1}, {"momentum", 1}, {"sgd", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vram_gpt *g = small_gpt(1, 0);
        int64_t params = tag_cur(VRAM_TAG_PARAMETER);
        vram_optim_config oc;
        CHECK_OK(vram_optim_config_parse(cases[i].name, &oc));
        vram_optimizer *o = NULL;
        CHECK_OK(vram_optimizer_new(rt, vram_gpt_params(g), &oc, &o));
        CHECK(tag_cur(VRAM_TAG_OPTIMIZER_STATE) == 0, "%s: state before the first step", cases[i].name);
        double l0 = train_pass(g, 2, 16, 3, 1.0);
        CHECK_OK(vram_optimizer_step(o));
        int64_t state = tag_cur(VRAM_TAG_OPTIMIZER_STATE);
        CHECK(state == cases[i].factor * params, "%s: optimizer state %lld bytes, expected %d x %lld", cases[i].name,
              (long long)state, cases[i].factor, (long long)params);
        vram_stats st;
        vram_allocator_get_stats(A, &st);
        CHECK(vram_optimizer_state_bytes(o) == (uint64_t)st.tags[VRAM_TAG_OPTIMIZER_STATE].requested_bytes.current,
              "%s: state_bytes %llu = requested optimizer-state bytes %lld", cases[i].name,
              (unsigned long long)vram_optimizer_state_bytes(o),
              (long long)st.tags[VRAM_TAG_OPTIMIZER_STATE].requested_bytes.current);
        /* a few more steps on the same batch lower its loss */
        double l = l0;
        for (int s = 0; s < 5; s++) {
            vram_param_list_zero_grad(vram_gpt_params(g), 1);
            l = train_pass(g, 2, 16, 3, 1.0);
            CHECK_OK(vram_optimizer_step(o));
        }
        CHECK(l < l0, "%s: loss %g did not fall below %g", cases[i].name, l, l0);
        printf("%-8s state %7lld bytes = %d x parameters %lld; loss %.4f -> %.4f\n", cases[i].name, (long long)state,
               cases[i].factor, (long long)params, l0, l);
        vram_optimizer_free(o);
        CHECK(tag_cur(VRAM_TAG_OPTIMIZER_STATE) == 0, "%s: state freed", cases[i].name);
        vram_gpt_free(g);
    }
}

static void copy_grads(vram_param_list *pl, float **out, int64_t *n) {
    int64_t total = vram_param_list_numel(pl), at = 0;
    float *buf = malloc(sizeof(float) * (size_t)total);
    for (int i = 0; i < vram_param_list_count(pl); i++) {
        vram_tensor *p = vram_param_list_get(pl, i), *g = vram_tensor_grad(p);
        int64_t k = vram_tensor_numel(p);
        if (g) {
            vram_tensor_read_host(g, buf + at);
        } else {
            memset(buf + at, 0, sizeof(float) * (size_t)k);
        }
        at += k;
    }
    *out = buf;
    *n = total;
}

static void test_accumulation(void) {
    vram_gpt *g = small_gpt(2, 0);
    vram_param_list *pl = vram_gpt_params(g);
    const int k = 4, b = 2, T = 16;
    /* one micro-batch of b */
    vram_allocator_reset_peak_stats(A);
    train_pass(g, b, T, 11, 1.0);
    int64_t peak_b = tag_peak(VRAM_TAG_ACTIVATION);
    vram_param_list_zero_grad(pl, 1);
    /* k micro-batches of b, accumulated: the micro-batches are the rows of one k*b batch */
    vram_tensor *ids = NULL, *tg = NULL;
    batch(k * b, T, 99, &ids, &tg);
    vram_allocator_reset_peak_stats(A);
    for (int m = 0; m < k; m++) {
        vram_tensor *mi = NULL, *mt = NULL, *loss = NULL, *scaled = NULL;
        CHECK_OK(vram_slice(ids, 0, m * b, (m + 1) * b, 1, &mi));
        CHECK_OK(vram_slice(tg, 0, m * b, (m + 1) * b, 1, &mt));
        CHECK_OK(vram_gpt_forward(g, mi, mt, 1, NULL, &loss));
        CHECK_OK(vram_scale(loss, 1.0 / k, &scaled));
        CHECK_OK(vram_backward(scaled, NULL));
        vram_tensor_free(mi);
        vram_tensor_free(mt);
        vram_tensor_free(loss);
        vram_tensor_free(scaled);
    }
    int64_t peak_acc = tag_peak(VRAM_TAG_ACTIVATION);
    float *g_acc;
    int64_t n;
    copy_grads(pl, &g_acc, &n);
    vram_param_list_zero_grad(pl, 1);
    /* the whole k*b batch at once */
    vram_allocator_reset_peak_stats(A);
    vram_tensor *loss = NULL;
    CHECK_OK(vram_gpt_forward(g, ids, tg, 1, NULL, &loss));
    CHECK_OK(vram_backward(loss, NULL));
    vram_tensor_free(loss);
    int64_t peak_kb = tag_peak(VRAM_TAG_ACTIVATION);
    float *g_full;
    copy_grads(pl, &g_full, &n);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)g_acc[i] - g_full[i]) / (1e-3 + fabs((double)g_full[i])));
    CHECK(worst < 1e-3, "accumulated gradient differs from the full batch's by %g (relative)", worst);
    CHECK(peak_acc == peak_b, "accumulation peak %lld != one micro-batch's %lld", (long long)peak_acc, (long long)peak_b);
    CHECK(peak_kb > 3 * peak_b, "k*b batch peak %lld should be ~%d x %lld", (long long)peak_kb, k, (long long)peak_b);
    printf("accumulation: peak activations %lld (k=%d micro-batches of %d) = %lld (one of %d); %lld for one batch of %d; "
           "gradients agree to %.1e\n",
           (long long)peak_acc, k, b, (long long)peak_b, b, (long long)peak_kb, k * b, worst);
    free(g_acc);
    free(g_full);
    vram_tensor_free(ids);
    vram_tensor_free(tg);
    vram_gpt_free(g);
}

static void test_checkpoint(void) {
    int64_t peak[2];
    float *grads[2];
    int64_t n = 0;
    double losses[2];
    for (int ck = 0; ck < 2; ck++) {
        vram_gpt *g = small_gpt(12, 0.1);
        vram_gpt_set_checkpoint(g, ck);
        vram_runtime_seed(rt, 4242); /* same dropout masks in both runs */
        vram_allocator_reset_peak_stats(A);
        losses[ck] = train_pass(g, 2, 16, 5, 1.0);
        peak[ck] = tag_peak(VRAM_TAG_ACTIVATION);
        CHECK(tag_cur(VRAM_TAG_ACTIVATION) == 0 && tag_cur(VRAM_TAG_TEMPORARY) == 0, "checkpoint %d: memory left after backward", ck);
        copy_grads(vram_gpt_params(g), &grads[ck], &n);
        vram_gpt_free(g);
    }
    double cut = 1.0 - (double)peak[1] / (double)peak[0];
    CHECK(cut >= 0.6, "checkpointing cut peak activations by %.1f%% (%lld -> %lld), expected >= 60%%", cut * 100,
          (long long)peak[0], (long long)peak[1]);
    CHECK(losses[0] == losses[1], "loss differs with checkpointing: %.9g vs %.9g", losses[0], losses[1]);
    int64_t diff = 0;
    /* the GPU sums some gradients with atomics, in no fixed order: equal to rounding there */
    for (int64_t i = 0; i < n; i++)
        diff += on_gpu ? fabs((double)grads[0][i] - grads[1][i]) > 1e-5 * (1e-3 + fabs((double)grads[0][i]))
                       : memcmp(&grads[0][i], &grads[1][i], sizeof(float)) != 0;
    CHECK(diff == 0, "%lld of %lld gradient values differ with checkpointing", (long long)diff, (long long)n);
    printf("checkpoint (12 layers, dropout 0.1): peak activations %lld -> %lld bytes (-%.1f%%), %lld gradients "
           "bit-identical\n",
           (long long)peak[0], (long long)peak[1], cut * 100, (long long)n);
    free(grads[0]);
    free(grads[1]);
}

static void test_out_of_memory(void) {
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    vram_runtime *r = NULL;
    CHECK_OK(vram_device_open("host:8MiB", &dev));
    CHECK_OK(vram_allocator_new(dev, NULL, &a));
    CHECK_OK(vram_runtime_new(a, 1, &r));
    vram_gpt_config c = {.layers = 2, .heads = 2, .width = 64, .vocab = 256, .context = 64};
    vram_gpt *g = NULL;
    CHECK_OK(vram_gpt_new(r, &c, &g));
    int64_t shape[2] = {64, 64};
    vram_tensor *ids = NULL, *loss = NULL;
    CHECK_OK(vram_tensor_new(r, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, &ids));
    vram_status s = vram_gpt_forward(g, ids, ids, 1, NULL, &loss);
    CHECK(s == VRAM_ERR_OUT_OF_MEMORY, "a 64x64 batch under 8 MiB: %s", vram_status_str(s));
    CHECK(strstr(vram_last_error(), "out of memory") != NULL, "detail: %s", vram_last_error());
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.current == 0 && st.tags[VRAM_TAG_TEMPORARY].allocated_bytes.current <= 
          (int64_t)(64 * 64 * 4 + 512), "a failed forward releases what it had built (%lld activation, %lld temporary)",
          (long long)st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.current,
          (long long)st.tags[VRAM_TAG_TEMPORARY].allocated_bytes.current);
    vram_tensor_free(ids);
    vram_gpt_free(g);
    vram_runtime_free(r);
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

static void test_convnet(void) {
    vram_convnet *c = NULL;
    vram_runtime_seed(rt, 3);
    CHECK_OK(vram_convnet_new(rt, 1, 8, 8, 3, &c));
    int64_t xs[4] = {2, 1, 8, 8}, ts[1] = {2};
    vram_tensor *x = NULL, *t = NULL, *logits = NULL, *loss = NULL;
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_F32, 4, xs, VRAM_TAG_TEMPORARY, &x));
    float p[128];
    for (int i = 0; i < 128; i++) p[i] = (float)((i * 37 % 11) / 11.0);
    vram_tensor_write_host(x, p);
    int32_t tv[2] = {0, 2};
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 1, ts, VRAM_TAG_TEMPORARY, tv, &t));
    vram_optim_config oc;
    vram_optim_config_default(VRAM_OPTIM_ADAM, &oc);
    oc.lr = 1e-2;
    vram_optimizer *o = NULL;
    CHECK_OK(vram_optimizer_new(rt, vram_convnet_params(c), &oc, &o));
    double first = 0, last = 0;
    for (int s = 0; s < 10; s++) {
        vram_param_list_zero_grad(vram_convnet_params(c), 1);
        CHECK_OK(vram_convnet_forward(c, x, &logits));
        CHECK_OK(vram_cross_entropy(logits, t, &loss));
        last = vram_tensor_item(loss);
        if (s == 0) first = last;
        CHECK_OK(vram_backward(loss, NULL));
        CHECK_OK(vram_optimizer_step(o));
        vram_tensor_free(logits);
        vram_tensor_free(loss);
    }
    for (int i = 0; i < vram_param_list_count(vram_convnet_params(c)); i++)
        CHECK(vram_tensor_grad(vram_param_list_get(vram_convnet_params(c), i)) != NULL, "conv param %d has no gradient", i);
    CHECK(last < first * 0.5, "conv classifier loss %g -> %g on a fixed batch", first, last);
    printf("convnet: loss %.4f -> %.4f in 10 Adam steps on a fixed batch\n", first, last);
    vram_optimizer_free(o);
    vram_tensor_free(x);
    vram_tensor_free(t);
    vram_convnet_free(c);
}

int main(int argc, char **argv) {
    const char *spec = argc > 1 ? argv[1] : "host";
    vram_device *dev = NULL;
    on_gpu = strncmp(spec, "cuda", 4) == 0;
    vram_status s = vram_device_open(spec, &dev);
    if (s != VRAM_OK && on_gpu) check_skip(vram_last_error());
    CHECK_OK(s);
    CHECK_OK(vram_allocator_new(dev, NULL, &A));
    CHECK_OK(vram_runtime_new(A, 2, &rt));
    if (!rt) return check_done();
    test_no_grad_and_backward();
    test_optimizer_state();
    test_accumulation();
    test_checkpoint();
    if (!on_gpu) test_out_of_memory(); /* a second runtime: one GPU runtime per process (vram train tests it there) */
    test_convnet();
    /* the attention report: nothing on the CPU, which has one attention; on the GPU only once an
     * attention call ran (none of these tests makes one) */
    char report[256];
    CHECK(vram_runtime_attention_report(rt, report, sizeof report) == NULL && !vram_runtime_attention_report(NULL, report, 8),
          "an attention report where no flash-attention call ran");
    CHECK(total_cur() == 0, "%lld bytes still allocated at the end", (long long)total_cur());
    vram_runtime_free(rt);
    vram_allocator_destroy(A);
    vram_device_close(dev);
    return check_done();
}
