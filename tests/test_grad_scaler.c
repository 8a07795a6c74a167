/* test_grad_scaler.c — dynamic loss scaling (optim.h's vram_grad_scaler) against GradScaler's
 * semantics, on the CPU, or on the GPU with the argument "cuda" (exit 77 without one).
 *
 * A linear layer trained by AdamW: backward seeded with the scale gives the unscaled gradients
 * times 65536, and unscale gives them back; a planted overflow (an inf input) skips the step:
 * weights, Adam's state and step count are untouched, the scale halves; clean steps (interval
 * shortened to 3) double it, and count. Bad configurations are refused.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "vram/alloc.h"
#include "vram/optim.h"

enum { IN = 5, OUT = 3, ROWS = 4 };

typedef struct rig {
    vram_device *dev;
    vram_allocator *a;
    vram_runtime *rt;
    vram_param_list *params;
    vram_tensor *w, *b;
    vram_optimizer *opt;
    vram_grad_scaler *scaler;
} rig;

static void host_of(vram_tensor *t, double *out) { CHECK_OK(vram_tensor_to_f64(t, out)); }

/* forward and backward of sum(linear(x)^2) with x[0] = x0 (inf plants an overflow) */
static void backward(rig *r, double x0, int scaled) {
    float x[ROWS * IN];
    for (int i = 0; i < ROWS * IN; i++) x[i] = (float)sin(0.7 * i + 0.3);
    x[0] = (float)x0;
    vram_tensor *xt = NULL, *y = NULL, *sq = NULL, *loss = NULL;
    CHECK_OK(vram_tensor_from_data(r->rt, VRAM_DTYPE_F32, 2, (int64_t[]){ROWS, IN}, VRAM_TAG_TEMPORARY, x, &xt));
    CHECK_OK(vram_linear(xt, r->w, r->b, &y));
    CHECK_OK(vram_mul(y, y, &sq));
    CHECK_OK(vram_sum(sq, &loss));
    CHECK_OK(vram_backward(loss, scaled ? vram_grad_scaler_seed(r->scaler) : NULL));
    vram_tensor_free(xt), vram_tensor_free(y), vram_tensor_free(sq), vram_tensor_free(loss);
}

static int open_rig(rig *r, const char *spec, int interval) {
    memset(r, 0, sizeof *r);
    if (vram_device_open(spec, &r->dev) != VRAM_OK) return 0;
    CHECK_OK(vram_allocator_new(r->dev, NULL, &r->a));
    CHECK_OK(vram_runtime_new(r->a, 1, &r->rt));
    vram_runtime_seed(r->rt, 7);
    CHECK_OK(vram_param_list_new(&r->params));
    vram_nn_linear lin;
    CHECK_OK(vram_nn_linear_init(&lin, r->rt, r->params, "lin", IN, OUT, 1));
    r->w = lin.weight, r->b = lin.bias;
    vram_optim_config oc;
    CHECK_OK(vram_optim_config_parse("adamw", &oc));
    oc.lr = 0.01;
    CHECK_OK(vram_optimizer_new(r->rt, r->params, &oc, &r->opt));
    vram_grad_scaler_config sc;
    vram_grad_scaler_config_default(&sc);
    CHECK(sc.init_scale == 65536 && sc.growth_factor == 2 && sc.backoff_factor == 0.5 && sc.growth_interval == 2000,
          "GradScaler's defaults");
    sc.growth_interval = interval;
    CHECK_OK(vram_grad_scaler_new(r->rt, r->opt, &sc, &r->scaler));
    return 1;
}

static void close_rig(rig *r) {
    vram_grad_scaler_free(r->scaler);
    vram_optimizer_free(r->opt);
    vram_param_list_free(r->params);
    vram_runtime_free(r->rt);
    vram_allocator_destroy(r->a);
    vram_device_close(r->dev);
}

/* One training step as vram train runs it; returns whether it was skipped. */
static int step(rig *r, double x0) {
    vram_param_list_zero_grad(r->params, 1);
    backward(r, x0, 1);
    CHECK_OK(vram_grad_scaler_unscale(r->scaler, r->params));
    CHECK_OK(vram_optimizer_clip_step(r->opt, 1.0, NULL)); /* (the GPU folds the clipping into the update) */
    int skipped = -1;
    CHECK_OK(vram_grad_scaler_update(r->scaler, &skipped));
    return skipped;
}

static void test_semantics(const char *spec) {
    rig r;
    if (!open_rig(&r, spec, 3)) return;
    /* scaled gradients are the plain ones x 65536; unscale returns them */
    double plain[OUT * IN], scaled[OUT * IN];
    backward(&r, 0.5, 0);
    host_of(vram_tensor_grad(r.w), plain);
    vram_param_list_zero_grad(r.params, 1);
    backward(&r, 0.5, 1);
    host_of(vram_tensor_grad(r.w), scaled);
    double worst = 0;
    for (int i = 0; i < OUT * IN; i++) worst = fmax(worst, fabs(scaled[i] - 65536.0 * plain[i]) / (65536.0 * fabs(plain[i]) + 1e-3));
    CHECK(worst < 1e-5, "%s: the seeded backward scales gradients by 65536 (worst relative error %.2g)", spec, worst);
    CHECK_OK(vram_grad_scaler_unscale(r.scaler, r.params));
    host_of(vram_tensor_grad(r.w), scaled);
    worst = 0;
    for (int i = 0; i < OUT * IN; i++) worst = fmax(worst, fabs(scaled[i] - plain[i]) / (fabs(plain[i]) + 1e-6));
    CHECK(worst < 1e-5, "%s: unscale returns the plain gradients (worst relative error %.2g)", spec, worst);

    /* a clean step, then a planted overflow: skipped, nothing moves, the scale halves */
    CHECK(step(&r, 0.5) == 0, "%s: a clean step is not skipped", spec);
    double w0[OUT * IN], m0[OUT * IN], v0[OUT * IN], w1[OUT * IN], m1[OUT * IN], v1[OUT * IN];
    int64_t steps0 = 0, steps1 = 0;
    vram_tensor *s1 = NULL, *s2 = NULL;
    vram_optimizer_state(r.opt, 0, &steps0, &s1, &s2);
    host_of(r.w, w0), host_of(s1, m0), host_of(s2, v0);
    CHECK(step(&r, INFINITY) == 1, "%s: an inf gradient skips the step", spec);
    vram_optimizer_state(r.opt, 0, &steps1, &s1, &s2);
    host_of(r.w, w1), host_of(s1, m1), host_of(s2, v1);
    CHECK(!memcmp(w0, w1, sizeof w0) && !memcmp(m0, m1, sizeof m0) && !memcmp(v0, v1, sizeof v0),
          "%s: the skipped step leaves weights and Adam's state untouched", spec);
    CHECK(steps0 == 1 && steps1 == 1, "%s: the skipped step is not counted (steps %lld -> %lld)", spec, (long long)steps0,
          (long long)steps1);
    CHECK(vram_grad_scaler_scale(r.scaler) == 32768, "%s: the scale halves after the overflow (%g)", spec,
          vram_grad_scaler_scale(r.scaler));
    CHECK(step(&r, NAN) == 1 && vram_grad_scaler_scale(r.scaler) == 16384, "%s: a NaN too", spec);
    CHECK(vram_grad_scaler_skipped(r.scaler) == 2, "%s: two steps skipped", spec);

    /* three clean steps in a row (the shortened interval) double it; the steps count */
    CHECK(step(&r, 0.5) == 0 && step(&r, 0.5) == 0, "%s: clean steps", spec);
    CHECK(vram_grad_scaler_scale(r.scaler) == 16384, "%s: no growth before the interval (%g)", spec,
          vram_grad_scaler_scale(r.scaler));
    CHECK(step(&r, 0.5) == 0 && vram_grad_scaler_scale(r.scaler) == 32768, "%s: the interval's clean steps double it (%g)",
          spec, vram_grad_scaler_scale(r.scaler));
    vram_optimizer_state(r.opt, 0, &steps1, &s1, &s2);
    CHECK(steps1 == 4, "%s: four counted steps (%lld)", spec, (long long)steps1);
    host_of(r.w, w1);
    CHECK(memcmp(w0, w1, sizeof w0) != 0, "%s: clean steps move the weights", spec);
    close_rig(&r);
}

static void test_bad_config(void) {
    rig r;
    CHECK(open_rig(&r, "host", 2000), "host rig");
    vram_grad_scaler *s = NULL;
    vram_grad_scaler_config bad[3];
    for (int i = 0; i < 3; i++) vram_grad_scaler_config_default(&bad[i]);
    bad[0].init_scale = 0, bad[1].backoff_factor = 1.5, bad[2].growth_interval = 0;
    for (int i = 0; i < 3; i++)
        CHECK(vram_grad_scaler_new(r.rt, r.opt, &bad[i], &s) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "grad scaler"),
              "bad configuration %d refused: %s", i, vram_last_error());
    close_rig(&r);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        vram_device *d = NULL;
        if (vram_device_open("cuda", &d) != VRAM_OK) check_skip(vram_last_error());
        vram_device_close(d);
        test_semantics("cuda");
        return check_done();
    }
    test_semantics("host");
    test_bad_config();
    return check_done();
}
