/* test_flash_emulated.cpp — the flash-attention kernels of src/runtime/cuda_flash_attention.cuh,
 * compiled for the CPU over flash_emulator.h, against attention computed in double from the same
 * 16-bit inputs: forward in both forms (16 and 32 rows a warp: output and lse) and the
 * backward forms: the one-pass ones over 64 and 128 keys a block (fused128 and fused128p, dQ
 * in the tile's iteration or one behind; with their dQ accumulator
 * zeroed by the dvec kernel and scaled by vk_flash_dq) and the split pairs (per 64 keys and
 * queries, and per 128).
 *
 * This runs the kernels' own fragment layouts, indexing, masking and shared-memory protocol
 * without a GPU: the accumulator starts as NaN and the gradient as garbage, so an element never
 * zeroed or never written shows; cp.async copies land late (at their wait), and once more at
 * issue. T around the 64-row tiles and 128-key blocks (1, 17, 65, 130, 200, 256) in bf16, 130
 * and 200 in f16. The GPU's own check is tests/gpu/test_gpu_flash.c; this one catches a
 * broken kernel before a GPU run.
 */
#include <algorithm>
#include <cstdio>

#include "flash_emulator.h"
#include "check.h"
#include "../src/runtime/cuda_flash_attention.cuh"
#include "../src/runtime/cuda_flash_backward128.cuh"

struct problem {
    int dt, B, T, H;
};

/* What the kernels produced, as floats: out [B, T, C], lse [B*H*T], and the gradient of qkv
 * [B, T, 3C] from each backward form (fused, split, fused128, split128, fused128p). */
enum { FORMS = 5 };
static const char *const form_names[FORMS] = {"fused", "split", "fused128", "split128", "fused128p"};
struct results {
    std::vector<float> out, lse, out32, lse32, grad[FORMS];
    int leftover = 0;
};

template <typename T> static std::vector<T> random_16(size_t n, double amp, uint64_t *x) {
    std::vector<T> v(n);
    for (T &e : v) {
        *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
        e = T((float)(amp * ((double)(*x >> 11) * 0x1.0p-53 * 2 - 1)));
    }
    return v;
}
template <typename T> static std::vector<float> floats(const std::vector<T> &v) { return std::vector<float>(v.begin(), v.end()); }

template <typename T>
static results run_kernels(const problem &p, const std::vector<T> &qkv, const std::vector<T> &gout) {
    int64_t B = p.B, Tn = p.T, H = p.H, C = H * 64, nb = (Tn + 63) / 64, blocks = nb * B * H;
    const char *x = (const char *)qkv.data(), *go = (const char *)gout.data();
    std::vector<T> out((size_t)(B * Tn * C)), gf((size_t)(B * Tn * 3 * C), T(12345.0f)), gs(gf.size(), T(-777.0f));
    std::vector<float> lse((size_t)(B * H * Tn)), dvec(lse.size()), dq((size_t)(B * Tn * C), NAN);
    float scale = 0.125f;
    int dt = p.dt, dot_blocks = (int)((B * H * Tn * 32 + 255) / 256), dq_blocks = (int)((B * Tn * H * 16 + 255) / 256);
    results r;
    r.leftover += emu_launch(blocks, 128, [&] { vk_flash_forward(dt, B, Tn, H, x, (char *)out.data(), lse.data(), scale); });
    r.leftover += emu_launch(dot_blocks, 256, [&] { vk_flash_dot(dt, B, Tn, H, go, (const char *)out.data(), dvec.data(), dq.data()); });
    r.leftover += emu_launch(blocks, 128, [&] {
        vk_flash_backward(dt, B, Tn, H, x, go, lse.data(), dvec.data(), (char *)gf.data(), dq.data(), scale);
    });
    r.leftover += emu_launch(dq_blocks, 256, [&] { vk_flash_dq(dt, B, Tn, H, dq.data(), (char *)gf.data(), scale); });
    std::vector<T> out32(out.size(), T(NAN));
    std::vector<float> lse32(lse.size(), NAN);
    r.leftover += emu_launch(blocks, 64, [&] { vk_flash_forward32(dt, B, Tn, H, x, (char *)out32.data(), lse32.data(), scale); });
    r.out32 = floats(out32), r.lse32 = lse32;
    std::fill(dvec.begin(), dvec.end(), NAN);
    r.leftover += emu_launch(dot_blocks, 256, [&] { vk_flash_dot(dt, B, Tn, H, go, (const char *)out.data(), dvec.data(), nullptr); });
    r.leftover += emu_launch(blocks, 128, [&] {
        vk_flash_backward_kv(dt, B, Tn, H, x, go, lse.data(), dvec.data(), (char *)gs.data(), scale);
    });
    r.leftover += emu_launch(blocks, 128, [&] {
        vk_flash_backward_q(dt, B, Tn, H, x, go, lse.data(), dvec.data(), (char *)gs.data(), scale);
    });
    /* the 128-key forms: 8 warps a block, one block per 128 keys */
    int64_t blocks128 = (Tn + 127) / 128 * B * H;
    std::vector<T> g128(gf.size(), T(4321.0f)), gs128(gf.size(), T(-99.0f));
    std::fill(dq.begin(), dq.end(), NAN);
    r.leftover += emu_launch(dot_blocks, 256, [&] { vk_flash_dot(dt, B, Tn, H, go, (const char *)out.data(), dvec.data(), dq.data()); });
    r.leftover += emu_launch(blocks128, 256, [&] {
        vk_flash_backward128(dt, B, Tn, H, x, go, lse.data(), dvec.data(), (char *)g128.data(), dq.data(), scale);
    });
    r.leftover += emu_launch(dq_blocks, 256, [&] { vk_flash_dq(dt, B, Tn, H, dq.data(), (char *)g128.data(), scale); });
    r.leftover += emu_launch(blocks128, 256, [&] {
        vk_flash_backward128_kv(dt, B, Tn, H, x, go, lse.data(), dvec.data(), (char *)gs128.data(), scale);
    });
    r.leftover += emu_launch(blocks128, 256, [&] {
        vk_flash_backward128_q(dt, B, Tn, H, x, go, lse.data(), dvec.data(), (char *)gs128.data(), scale);
    });
    std::vector<T> g128p(gf.size(), T(-5.0f));
    std::fill(dq.begin(), dq.end(), NAN);
    r.leftover += emu_launch(dot_blocks, 256, [&] { vk_flash_dot(dt, B, Tn, H, go, (const char *)out.data(), dvec.data(), dq.data()); });
    r.leftover += emu_launch(blocks128, 256, [&] {
        vk_flash_backward128p(dt, B, Tn, H, x, go, lse.data(), dvec.data(), (char *)g128p.data(), dq.data(), scale);
    });
    r.leftover += emu_launch(dq_blocks, 256, [&] { vk_flash_dq(dt, B, Tn, H, dq.data(), (char *)g128p.data(), scale); });
    r.out = floats(out), r.lse = lse;
    r.grad[0] = floats(gf), r.grad[1] = floats(gs), r.grad[2] = floats(g128), r.grad[3] = floats(gs128);
    r.grad[4] = floats(g128p);
    return r;
}

/* Causal attention of one (batch, head) in double: out, lse and the gradient of qkv from gout. */
static void reference_head(const problem &p, int b, int h, const std::vector<float> &qkv, const std::vector<float> &gout,
                           std::vector<double> &out, std::vector<double> &lse, std::vector<double> &grad) {
    int Tn = p.T, C = p.H * 64, W = 3 * C;
    const double scale = 0.125;
    auto at = [&](int t, int part, int d) { return (double)qkv[((size_t)b * Tn + t) * W + part * C + h * 64 + d]; };
    auto g = [&](int t, int d) { return (double)gout[((size_t)b * Tn + t) * C + h * 64 + d]; };
    for (int i = 0; i < Tn; i++) {
        std::vector<double> pr(i + 1);
        double mx = -INFINITY, sum = 0, o[64] = {0}, dd = 0;
        for (int j = 0; j <= i; j++) {
            double s = 0;
            for (int d = 0; d < 64; d++) s += at(i, 0, d) * at(j, 1, d);
            pr[j] = s * scale, mx = std::max(mx, pr[j]);
        }
        for (int j = 0; j <= i; j++) pr[j] = exp(pr[j] - mx), sum += pr[j];
        for (int j = 0; j <= i; j++)
            for (int d = 0; d < 64; d++) o[d] += pr[j] / sum * at(j, 2, d);
        for (int d = 0; d < 64; d++) out[((size_t)b * Tn + i) * C + h * 64 + d] = o[d], dd += o[d] * g(i, d);
        lse[((size_t)b * p.H + h) * Tn + i] = mx + log(sum);
        for (int j = 0; j <= i; j++) {
            double dp = 0, pj = pr[j] / sum;
            for (int d = 0; d < 64; d++) dp += g(i, d) * at(j, 2, d);
            double ds = pj * (dp - dd);
            for (int d = 0; d < 64; d++) {
                grad[((size_t)b * Tn + i) * W + h * 64 + d] += scale * ds * at(j, 1, d);
                grad[((size_t)b * Tn + j) * W + C + h * 64 + d] += scale * ds * at(i, 0, d);
                grad[((size_t)b * Tn + j) * W + 2 * C + h * 64 + d] += pj * g(i, d);
            }
        }
    }
}

/* Relative error (norm of the difference over the reference's norm, at least `at_least`) over
 * the elements of `part` (-1 all; 0, 1, 2 the q, k, v thirds of rows `width` wide); infinite
 * where any element is not finite. */
template <typename R>
static double rel_err(const std::vector<R> &ref, const std::vector<float> &got, size_t width, int part, double at_least) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        if (part >= 0 && (int)((i % width) / (width / 3)) != part) continue;
        double d = (double)ref[i] - got[i];
        if (!std::isfinite(got[i])) return INFINITY;
        num += d * d, den += (double)ref[i] * ref[i];
    }
    return sqrt(num) / std::max(sqrt(den), std::max(at_least, 1e-30));
}

template <typename T> static void check_problem(const problem &p, int early, uint64_t seed) {
    int64_t C = p.H * 64;
    std::vector<T> qkv = random_16<T>((size_t)(p.B * p.T * 3 * C), 2.0, &seed), gout = random_16<T>((size_t)(p.B * p.T * C), 1.0, &seed);
    emu_cp_early = early;
    results r = run_kernels(p, qkv, gout);
    std::vector<double> out(r.out.size()), lse(r.lse.size()), grad(r.grad[0].size(), 0.0);
    for (int b = 0; b < p.B; b++)
        for (int h = 0; h < p.H; h++) reference_head(p, b, h, floats(qkv), floats(gout), out, lse, grad);
    /* bf16 keeps 8 significant bits, f16 11 (P and dS are rounded to them before products) */
    double tol = p.dt == VK_BF16 ? 1e-2 : 2e-3, grad_norm = 0, e_lse = 0;
    for (double g : grad) grad_norm += g * g;
    for (size_t i = 0; i < lse.size(); i++)
        e_lse = std::max(e_lse, std::max(fabs(lse[i] - r.lse[i]), fabs(lse[i] - r.lse32[i]))); /* (NaN fails) */
    if (!(e_lse == e_lse)) e_lse = INFINITY;
    char what[96];
    snprintf(what, sizeof what, "%s B=%d T=%d H=%d, cp.async %s", p.dt == VK_BF16 ? "bf16" : "f16", p.B, p.T, p.H,
             early ? "at once" : "at the wait");
    double e_out = rel_err(out, r.out, (size_t)C, -1, 0), e_out32 = rel_err(out, r.out32, (size_t)C, -1, 0);
    CHECK(e_out <= tol && e_out32 <= tol, "%s: output relative error %.3g (rows16), %.3g (rows32)", what, e_out, e_out32);
    CHECK(e_lse <= 1e-4, "%s: lse off by %.3g", what, e_lse);
    CHECK(r.leftover == 0, "%s: %d threads left cp.async copies unwaited", what, r.leftover);
    printf("%s: out %.2e (rows32 %.2e), lse %.1e;", what, e_out, e_out32, e_lse);
    const char *parts[3] = {"dQ", "dK", "dV"};
    for (int k = 0; k < 3; k++) { /* (at T = 1, dQ and dK are 0: measured against 1% of the whole) */
        printf(" %s", parts[k]);
        for (int f = 0; f < FORMS; f++) {
            double e = rel_err(grad, r.grad[f], (size_t)(3 * C), k, 1e-2 * sqrt(grad_norm));
            /* the same products as split's (P's exponent is rounded differently in the 128-key
             * forms, dQ summed in another order), so all but the last bits agree */
            double evs = rel_err(r.grad[1], r.grad[f], (size_t)(3 * C), k, 1e-2 * sqrt(grad_norm));
            CHECK(e <= 2 * tol, "%s: %s relative error %.3g (%s)", what, parts[k], e, form_names[f]);
            CHECK(evs <= 1e-3, "%s: %s %s against split: relative error %.3g", what, form_names[f], parts[k], evs);
            /* split128's dQ kernel gives each row split's products in split's order */
            CHECK(f != 3 || k != 0 || evs == 0, "%s: split128's dQ differs from split's (relative %.3g)", what, evs);
            printf(" %.2e %s%s", e, form_names[f], f + 1 < FORMS ? "," : ";");
        }
    }
    printf("\n");
}

int main(void) {
    const problem bf16[] = {{VK_BF16, 1, 1, 2}, {VK_BF16, 1, 17, 1}, {VK_BF16, 2, 65, 1}, {VK_BF16, 1, 130, 2},
                            {VK_BF16, 1, 256, 1}, {VK_BF16, 1, 200, 1}};
    for (const problem &p : bf16) check_problem<__nv_bfloat16>(p, 0, 0x9e3779b97f4a7c15ull + (uint64_t)p.T);
    check_problem<__half>({VK_F16, 1, 130, 1}, 0, 0x2545f4914f6cdd1dull);
    check_problem<__nv_bfloat16>(bf16[3], 1, 0x9e3779b97f4a7c15ull); /* copies landing at once */
    check_problem<__half>({VK_F16, 1, 200, 1}, 1, 0x2545f4914f6cdd1dull);
    return check_done();
}
