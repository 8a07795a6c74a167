/* test_ce_emulated.cpp — the fused classifier's two cross-entropy kernels
 * (cuda_classifier_kernels.cuh: vk_cross_entropy_rows, the register kernel, and
 * vk_cross_entropy_fused) compiled for the CPU over flash_emulator.h, a block of up to 1024 OS
 * threads, against a double-precision reference computed from the same 16-bit logits.
 *
 * Each case fills [rows, ld] bf16 or f16 logits (the n classes random, the padding columns n..ld
 * large, so that a kernel that lets one into its max or sum gets a visibly wrong loss), picks
 * targets at column 0, n - 1 and random ones, and launches a kernel as cuda_ops.c does (the
 * register kernel a block of VK_CE_REG_THREADS a row; the fused one row_threads(n) threads, here
 * on fewer blocks than rows so that its row loop runs). Checked: the loss sum the kernel adds to
 * (a non-zero start, so that an overwrite shows) against the sum over rows of lse - x[target] in
 * double; every class column against scale * (softmax - onehot) in double, within the 16-bit
 * rounding and float's error; the padding columns exactly +0; with scale 0 the logits untouched;
 * the memory past the last row untouched. Widths: GPT-2's 50257 of 50304, 1000 of 1000 and 1008,
 * a partial last vector, a row whose only vector is partial, and the widest the registers hold
 * (VK_CE_REG_VPT * VK_CE_REG_THREADS * 8). The GPU's own check is tests/gpu/test_gpu_classifier.c.
 */
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "flash_emulator.h"
#include "check.h"
#include "../src/runtime/cuda_classifier_kernels.cuh"

enum { ROWS_KERNEL, FUSED_KERNEL };

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand() {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

static uint16_t to16(float f, int dt) { return dt == VK_BF16 ? __nv_bfloat16(f).x : __half(f).x; }
static double from16(uint16_t u, int dt) {
    __nv_bfloat16 b;
    __half h;
    b.x = h.x = u;
    return dt == VK_BF16 ? (double)(float)b : (double)(float)h;
}

/* cuda_ops.c's block size for the fused kernel */
static int row_threads(int64_t n) { return n >= 4096 ? 1024 : n >= 1024 ? 256 : n > 128 ? 128 : 64; }

/* One case: rows of [n, ld] logits through one kernel, then the checks. */
static void run_case(int kernel, int dt, int64_t rows, int64_t n, int64_t ld, double scale) {
    const char *kname = kernel == ROWS_KERNEL ? "rows" : "fused", *tname = dt == VK_BF16 ? "bf16" : "f16";
    const int64_t slack = 64; /* 16-bit values past the last row that must stay as they were */
    int64_t total = rows * ld + slack;
    uint4 *store = (uint4 *)aligned_alloc(16, (size_t)((total * 2 + 15) / 16 * 16));
    uint16_t *x = (uint16_t *)store;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < ld; j++)
            x[r * ld + j] = to16(j < n ? (float)(-6 + 12 * urand()) : (float)(8 + 4 * urand()), dt);
    for (int64_t i = rows * ld; i < total; i++) x[i] = (uint16_t)(0x3c00 + i % 7);
    std::vector<uint16_t> x0(x, x + total);
    int tdt = ld % 16 ? VK_I64 : VK_I32; /* both target types */
    std::vector<int64_t> t64((size_t)rows);
    std::vector<int32_t> t32((size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = r == 0 ? 0 : r == 1 ? n - 1 : (int64_t)(urand() * (double)n);
        t64[(size_t)r] = t, t32[(size_t)r] = (int32_t)t;
    }
    const char *targets = tdt == VK_I64 ? (const char *)t64.data() : (const char *)t32.data();
    const double start = 0.375;
    double loss = start;
    if (kernel == ROWS_KERNEL)
        emu_launch(rows, VK_CE_REG_THREADS,
                   [&] { vk_cross_entropy_rows(dt, rows, n, ld, scale, (char *)x, targets, tdt, &loss); });
    else
        emu_launch(rows > 2 ? rows - 1 : rows, row_threads(n),
                   [&] { vk_cross_entropy_fused(dt, rows, n, ld, scale, (char *)x, targets, tdt, &loss); });

    /* the reference, from the same 16-bit logits */
    double want = start, worst = 0, tol_rel = dt == VK_BF16 ? 0x1p-8 : 0x1p-11, tol_abs = dt == VK_F16 ? 0x1p-25 : 0;
    int64_t bad = 0, bad_pad = 0, bad_slack = 0;
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *xr = &x0[(size_t)(r * ld)];
        int64_t t = t64[(size_t)r];
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < n; j++) mx = fmax(mx, from16(xr[j], dt));
        for (int64_t j = 0; j < n; j++) s += exp(from16(xr[j], dt) - mx);
        double lse = mx + log(s);
        want += lse - from16(xr[t], dt);
        for (int64_t j = 0; j < ld; j++) {
            uint16_t got = x[r * ld + j];
            if (scale == 0) {
                bad += got != xr[j];
            } else if (j >= n) {
                bad_pad += got != 0;
            } else {
                double ref = scale * (exp(from16(xr[j], dt) - lse) - (j == t ? 1.0 : 0.0));
                double d = fabs(from16(got, dt) - ref);
                double allowed = (tol_rel + 2e-5) * fabs(ref) + tol_abs; /* 16-bit rounding, float's error */
                worst = fmax(worst, d / allowed);
                bad += !(d <= allowed);
            }
        }
    }
    for (int64_t i = rows * ld; i < total; i++) bad_slack += x[i] != x0[(size_t)i];
    CHECK(fabs(loss - want) <= 2e-5 * (double)rows * fmax(1.0, fabs(want - start) / (double)rows),
          "%s %s n %lld ld %lld: loss sum %.9g, the double reference %.9g", kname, tname, (long long)n, (long long)ld,
          loss, want);
    CHECK(bad == 0, "%s %s n %lld ld %lld scale %g: %lld class columns off the reference", kname, tname, (long long)n,
          (long long)ld, scale, (long long)bad);
    CHECK(bad_pad == 0, "%s %s n %lld ld %lld: %lld padding columns not +0", kname, tname, (long long)n, (long long)ld,
          (long long)bad_pad);
    CHECK(bad_slack == 0, "%s %s n %lld ld %lld: %lld values past the last row changed", kname, tname, (long long)n,
          (long long)ld, (long long)bad_slack);
    printf("%-5s %-4s rows %lld n %6lld ld %6lld scale %-8.4g: loss %.9g (reference %.9g), %lld columns off, "
           "worst gradient error %.2f of its bound\n",
           kname, tname, (long long)rows, (long long)n, (long long)ld, scale, loss, want, (long long)bad, worst);
    free(store);
}

int main() {
    const int64_t widest = (int64_t)VK_CE_REG_VPT * VK_CE_REG_THREADS * 8;
    struct {
        int64_t rows, n, ld;
        double scale;
        int fused_only;
    } cases[] = {
        {3, 50257, 50304, 1.0 / 3, 0},      /* GPT-2's vocabulary, padded */
        {2, 1000, 1000, 1.0 / 2, 0},        /* no padding */
        {2, 1000, 1008, 1.0 / 2, 0},        /* a padding vector */
        {3, 1003, 1008, 1.0 / 3, 0},        /* a partial last vector */
        {2, 13, 64, 1.0 / 2, 0},            /* most threads hold nothing */
        {2, 5, 8, 1.0 / 2, 0},              /* a row of one partial vector */
        {3, widest, widest, 1.0 / 3, 0},    /* every register slot full */
        {2, widest - 3, widest, 1.0 / 2, 0}, /* the widest, its last vector partial */
        {2, 1000, 1008, 0.0, 0},            /* loss only: the logits stay */
        {3, 1000, 1003, 1.0 / 3, 1},        /* ld not a multiple of 8: the fused kernel's scalar path */
    };
    for (int dt : {VK_BF16, VK_F16})
        for (const auto &c : cases) {
            if (!c.fused_only) run_case(ROWS_KERNEL, dt, c.rows, c.n, c.ld, c.scale);
            run_case(FUSED_KERNEL, dt, c.rows, c.n, c.ld, c.scale);
        }
    return check_done();
}
