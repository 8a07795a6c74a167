/* test_optim_emulated.cpp — the optimizer step's vector list kernels (cuda_optim_list.cuh:
 * vk_adam_update_list_vec, vk_list_sum_squares_vec) compiled for the CPU over flash_emulator.h
 * (a block is 256 threads with a barrier), against a plain loop over every element.
 *
 * This runs the kernels' own chunk search, tensor offsets, vector and scalar paths and tails
 * without a GPU. The lists hold tensors of awkward sizes (0, 1, 3, 7, 4095, 4097, 8195, whole
 * chunks, a million and 5), some one or two elements past an aligned address (their chunks take
 * the scalar path) or with only the gradient misaligned, some with a kept bf16 or f16 copy, the
 * starts padded to VK_LIST_CHUNK as cuda_ops.c pads them; the slack around every tensor must
 * stay untouched. Checked: each element's p, m, v and copy equal to adam_elem applied in the
 * loop (the same function, so bit for bit), and p against the formula in double (relative
 * 1e-5); the skip flag leaves everything as it was; the sum of squares against a double sum
 * (relative 1e-6). The GPU's own check is tests/gpu/test_gpu_optim_list.c.
 */
#include <cstdio>
#include <vector>

#include "flash_emulator.h"
#include "check.h"
#include "../src/runtime/cuda_optim_list.cuh"

struct item {
    int64_t n;
    int off, goff, lowp; /* lowp: VK_BF16, VK_F16 or 0 (no copy) */
};

/* One tensor's arrays (4 elements of slack either side, the tensor at 4 + off) and their copies
 * from before the step. */
struct arrays {
    std::vector<float> p, g, m, v, p0, m0, v0;
    std::vector<uint16_t> lw, lw0;
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand() {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

static void fill(std::vector<float> &x, int64_t n, double lo, double hi) {
    x.resize((size_t)n + 8);
    for (float &e : x) e = (float)(lo + (hi - lo) * urand());
}

static float lowp_value(uint16_t u, int dt) {
    __nv_bfloat16 b;
    __half h;
    b.x = h.x = u;
    return dt == VK_BF16 ? (float)b : (float)h;
}

/* One case: the vector kernel over the list, then the checks. */
static void run_case(const char *name, const std::vector<item> &its, const vk_adam_consts &k, int skip_set) {
    int count = (int)its.size();
    std::vector<arrays> a((size_t)count);
    std::vector<vk_adam_entry> tab((size_t)count);
    std::vector<vk_list_entry> ltab((size_t)count);
    int64_t start = 0;
    int lowp_dt = 0;
    for (int t = 0; t < count; t++) {
        const item &it = its[(size_t)t];
        arrays &x = a[(size_t)t];
        fill(x.p, it.n, -1, 1), fill(x.g, it.n, -2, 2), fill(x.m, it.n, -0.1, 0.1), fill(x.v, it.n, 0, 0.01);
        x.lw.assign((size_t)it.n + 8, 0x4040), x.p0 = x.p, x.m0 = x.m, x.v0 = x.v, x.lw0 = x.lw;
        size_t o = 4 + (size_t)it.off;
        if (it.lowp) lowp_dt = it.lowp;
        tab[(size_t)t] = {(char *)&x.p[o], (const char *)&x.g[o + (size_t)it.goff], (char *)&x.m[o], (char *)&x.v[o],
                          it.lowp ? (char *)&x.lw[o] : nullptr, it.n, start};
        ltab[(size_t)t] = {(char *)&x.g[o + (size_t)it.goff], it.n, start};
        start += (it.n + VK_LIST_CHUNK - 1) / VK_LIST_CHUNK * VK_LIST_CHUNK;
    }
    int64_t nchunks = start / VK_LIST_CHUNK;
    int32_t skip = skip_set;
    emu_launch(nchunks < 7 ? nchunks : 7, 256, [&] { vk_adam_update_list_vec(count, tab.data(), nchunks, k, &skip, lowp_dt); });
    int64_t bad = 0, bad_formula = 0;
    double want_sq = 0;
    for (int t = 0; t < count; t++) {
        const item &it = its[(size_t)t];
        arrays &x = a[(size_t)t];
        int64_t wrong = 0;
        for (int64_t j = 0; j < it.n + 8; j++) {
            int64_t e = j - 4 - it.off; /* the tensor's element, or slack */
            float p = x.p0[(size_t)j], m = x.m0[(size_t)j], v = x.v0[(size_t)j];
            uint16_t lw = x.lw0[(size_t)j];
            if (e >= 0 && e < it.n && !skip_set) {
                float g = x.g[(size_t)(j + it.goff)];
                double rp = p * (double)k.decay, rg = (double)m_mul_rn(g, k.gc);
                double rm = k.b1 * (double)m + (1 - (double)k.b1) * rg, rv = k.b2 * (double)v + (1 - (double)k.b2) * rg * rg;
                rp -= k.ss * rm / (sqrt(rv) / k.sb + k.eps);
                adam_elem(k, p, g, m, v);
                bad_formula += !(fabs(p - rp) <= 1e-5 * fabs(rp) + 1e-7);
                if (it.lowp == VK_BF16) lw = __nv_bfloat16(p).x;
                else if (it.lowp == VK_F16) lw = __half(p).x;
            }
            wrong += x.p[(size_t)j] != p || x.m[(size_t)j] != m || x.v[(size_t)j] != v || x.lw[(size_t)j] != lw;
        }
        CHECK(wrong == 0, "%s: tensor %d (n %lld, offset %d, gradient offset %d): %lld elements differ from the loop",
              name, t, (long long)it.n, it.off, it.goff, (long long)wrong);
        bad += wrong;
        if (it.lowp && it.n > 0 && !skip_set) {
            size_t o = 4 + (size_t)it.off;
            CHECK(fabs(lowp_value(x.lw[o], it.lowp) - x.p[o]) <= 1e-2 * fabs(x.p[o]), "%s: tensor %d's copy %g, p %g",
                  name, t, lowp_value(x.lw[o], it.lowp), x.p[o]);
        }
        for (int64_t j = 0; j < it.n; j++) {
            double g = x.g[(size_t)(4 + it.off + it.goff + j)];
            want_sq += g * g;
        }
    }
    CHECK(bad_formula == 0, "%s: %lld parameters off the double formula", name, (long long)bad_formula);
    double sq = 0;
    emu_launch(nchunks < 5 ? nchunks : 5, 256, [&] { vk_list_sum_squares_vec(count, ltab.data(), nchunks, &sq); });
    CHECK(fabs(sq - want_sq) <= 1e-6 * want_sq, "%s: sum of squares %.17g, the double sum %.17g", name, sq, want_sq);
    printf("%s: %d tensors, %lld chunks, %lld elements wrong\n", name, count, (long long)nchunks, (long long)bad);
}

int main() {
    const int B = VK_BF16, H = VK_F16;
    std::vector<item> odd = {{1, 0, 0, B},    {3, 0, 0, B},    {7, 1, 0, B},    {4097, 0, 0, B}, {0, 0, 0, B},
                             {4096, 0, 0, 0}, {4095, 1, 0, B}, {8195, 0, 1, B}, {768, 0, 0, B},  {2304, 3, 0, 0},
                             {12288, 0, 0, B}, {5, 2, 0, B},   {65537, 1, 0, B}, {1000005, 0, 0, B}};
    std::vector<item> halves = {{4097, 0, 0, H}, {3, 1, 0, H}, {8192, 0, 0, 0}, {20001, 2, 0, H}};
    vk_adam_consts adamw = {3.7e-3f, 0.37f, 0.9f, 0.95f, 1e-8f, 1 - 1e-4f, 0.1f, 1.0f, 1};
    vk_adam_consts clipped = adamw;
    clipped.gc = 0.37f;
    run_case("AdamW, odd sizes", odd, adamw, 0);
    run_case("AdamW, gcoef 0.37", odd, clipped, 0);
    run_case("AdamW, f16 copies", halves, clipped, 0);
    run_case("AdamW, skip flag set", odd, clipped, 1);
    return check_done();
}
