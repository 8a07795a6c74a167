/* test_ln_emulated.cpp — layer norm's backward GPU kernels (cuda_layer_norm_kernels.cuh)
 * compiled for the CPU over flash_emulator.h (a block is `threads` OS threads, warp shuffles
 * exchanged through per-warp slots, bf16 and f16 rounded in software), against a reference in
 * double from the same 16-bit inputs.
 *
 * Kernels run as cuda_ops.c launches them: the pair (vk_layer_norm_backward_x, the warp-a-row
 * path at widths that are multiples of 256 up to VK_LN_WARP_MAX and the block-a-row path at the
 * others, then the column sums vk_layer_norm_backward_wb), the one-pass
 * vk_layer_norm_backward_fused, and their _mixed forms (f32 x and gx, 16-bit gout); bf16 and f16,
 * f32 for the block path; fewer blocks than rows so the grid-stride loops turn.
 *
 * The contract of gx_add (VRAM_GRAD_ADOPT): the kernel adds its value v to what gx holds as a
 * separate accumulate of a gx computed on its own would, gx = TI(float(old) + float(TI(v))): v
 * rounded to gx's type, one f32 add, one rounding to gx's type (for f32 gx, one f32 add). So
 * each case runs with gx_add off (gx0 = TI(v)) and on, over the same inputs, and checks that
 * the second is that formula applied to the first bit for bit. gx0 itself is checked against
 * the double reference within one unit of TI's last place plus f32's error in v; gw and gb
 * (added to, in f32) within f32 summation's error. Elements past each row's end and past the
 * arrays must stay untouched, and the zeroing the pair's first kernel does for gw and gb under
 * vram_fewer_launches is run once.
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "flash_emulator.h"
#include "check.h"
#include "../src/runtime/cuda_layer_norm_kernels.cuh"

enum path { PAIR, FUSED };

/* A 16-byte-aligned array of `n` elements of `size` bytes with SLACK elements of a sentinel
 * either side (the kernel gets `at()`, an offset of `off` elements past the aligned start). */
struct buf {
    static const int SLACK = 16;
    std::vector<unsigned char> raw;
    unsigned char *base;
    size_t size, n;
    int off;
    buf(size_t size_, size_t n_, int off_ = 0) : raw((n_ + 2 * SLACK + 1) * size_ + 64), size(size_), n(n_), off(off_) {
        base = (unsigned char *)(((uintptr_t)raw.data() + 15) & ~(uintptr_t)15);
        std::fill(raw.begin() + (base - raw.data()), raw.begin() + (base - raw.data()) + (ptrdiff_t)bytes(), 0x5a);
    }
    buf(const buf &o) : buf(o.size, o.n, o.off) { memcpy(base, o.base, bytes()); }
    buf &operator=(const buf &) = delete;
    size_t bytes() const { return (n + 2 * SLACK + 1) * size; }
    char *at() { return (char *)(base + (SLACK + off) * size); }
    bool slack_intact() const {
        size_t total = (n + 2 * SLACK + 1) * size, lo = (SLACK + off) * size, hi = lo + n * size;
        for (size_t i = 0; i < total; i++)
            if ((i < lo || i >= hi) && base[i] != 0x5a) return false;
        return true;
    }
};

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand() {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

/* Element access by dtype: VK_BF16, VK_F16 or VK_F32 storage. */
static size_t dsize(int dt) {
    return dt == VK_F32 ? 4 : 2;
}
static double get(int dt, const char *p, size_t i) {
    if (dt == VK_F32) return ((const float *)p)[i];
    uint16_t u;
    memcpy(&u, p + 2 * i, 2);
    __nv_bfloat16 b;
    __half h;
    b.x = h.x = u;
    return dt == VK_BF16 ? (float)b : (float)h;
}
static void put(int dt, char *p, size_t i, float v) {
    if (dt == VK_F32)
        ((float *)p)[i] = v;
    else {
        uint16_t u = dt == VK_BF16 ? __nv_bfloat16(v).x : __half(v).x;
        memcpy(p + 2 * i, &u, 2);
    }
}
static float round_to(int dt, float v) {
    return dt == VK_F32 ? v : dt == VK_BF16 ? (float)__nv_bfloat16(v) : (float)__half(v);
}
/* Half a unit in the last place of |v| in dt (bf16 8 significant bits, f16 11, f32 24). */
static double half_ulp(int dt, double v) {
    int bits = dt == VK_BF16 ? 8 : dt == VK_F16 ? 11 : 24;
    int e;
    frexp(fabs(v) > 0x1p-14 ? fabs(v) : 0x1p-14, &e);
    return ldexp(1.0, e - bits - 1);
}

struct ln_case {
    const char *name;
    path p;
    int dt, mixed; /* dt: gout's (and, unless mixed, x's and gx's) dtype; mixed: x and gx f32 */
    int64_t rows, n;
    int with_w, write_wb; /* write_wb: the pair's first kernel zeroes gw and gb (fewer launches) */
    int gx_off;           /* elements gx sits past a 16-byte boundary (off the warp path) */
};

/* Runs the case's kernels once with gx_add = add; gx holds `old` on entry. */
static void launch(const ln_case &c, int add, buf &gx, buf &gw, buf &gb, buf &gout, buf &x, buf &w, buf &mean,
                   buf &rstd) {
    int dt = c.dt;
    int64_t rows = c.rows, n = c.n;
    char *gxv = gx.at(), *gwv = gw.at(), *gbv = gb.at(), *wv = c.with_w ? w.at() : nullptr;
    if (c.p == FUSED) {
        int threads = c.mixed ? 256 : 512, per = threads / 32;
        int64_t blocks = (rows + per - 1) / per > 2 ? 2 : (rows + per - 1) / per;
        emu_launch(blocks, threads, [&] {
            if (c.mixed)
                vk_layer_norm_mixed_backward_fused(dt, rows, n, gxv, add, gwv, gbv, gout.at(), x.at(), wv, mean.at(),
                                                   rstd.at());
            else
                vk_layer_norm_backward_fused(dt, rows, n, gxv, add, gwv, gbv, gout.at(), x.at(), wv, mean.at(),
                                             rstd.at());
        });
        return;
    }
    /* layer_norm_shape's threads, fewer blocks than it takes so each block visits several rows */
    int warp = (dt == VK_BF16 || dt == VK_F16) && n % 256 == 0 && n <= VK_LN_WARP_MAX;
    int threads = warp ? 256 : n >= 4096 ? 1024 : n >= 1024 ? 256 : n > 128 ? 128 : 64;
    int64_t blocks = warp ? ((rows + 7) / 8 > 2 ? 2 : (rows + 7) / 8) : (rows > 3 ? 3 : rows);
    char *zw = c.write_wb ? gwv : nullptr, *zb = c.write_wb ? gbv : nullptr;
    int64_t zwords = c.write_wb ? n : 0;
    emu_launch(blocks, threads, [&] {
        if (c.mixed)
            vk_layer_norm_mixed_backward_x(dt, rows, n, gxv, add, gout.at(), x.at(), wv, mean.at(), rstd.at(), zw, zb,
                                           zwords);
        else
            vk_layer_norm_backward_x(dt, rows, n, gxv, add, gout.at(), x.at(), wv, mean.at(), rstd.at(), zw, zb,
                                     zwords);
    });
    int64_t chunk = 5, chunks = (rows + chunk - 1) / chunk;
    emu_launch((n * chunks + 255) / 256 > 3 ? 3 : (n * chunks + 255) / 256, 256, [&] {
        if (c.mixed)
            vk_layer_norm_mixed_backward_wb(dt, rows, n, chunk, gwv, gbv, gout.at(), x.at(), mean.at(), rstd.at());
        else
            vk_layer_norm_backward_wb(dt, rows, n, chunk, gwv, gbv, gout.at(), x.at(), mean.at(), rstd.at());
    });
}

static void run_case(const ln_case &c) {
    int xdt = c.mixed ? VK_F32 : c.dt;
    int64_t rows = c.rows, n = c.n;
    size_t total = (size_t)(rows * n);
    buf gout(dsize(c.dt), total), x(dsize(xdt), total), w(4, (size_t)n), mean(4, (size_t)rows), rstd(4, (size_t)rows);
    buf old(dsize(xdt), total, c.gx_off), gw0(4, (size_t)n), gb0(4, (size_t)n);
    for (size_t i = 0; i < total; i++) {
        int64_t r = (int64_t)i / n;
        put(c.dt, gout.at(), i, (float)(2 * urand() - 1));
        put(xdt, x.at(), i, (float)(0.1 * r - 0.5 + 3 * urand() - 1.5));
        put(xdt, old.at(), i, (float)(urand() - 0.5)); /* the size of v, so roundings in the add matter */
    }
    for (int64_t j = 0; j < n; j++) {
        ((float *)w.at())[j] = (float)(0.5 + urand());
        ((float *)gw0.at())[j] = (float)(urand() - 0.5), ((float *)gb0.at())[j] = (float)(urand() - 0.5);
    }
    for (int64_t r = 0; r < rows; r++) { /* the statistics the forward would have stored */
        double s = 0, q = 0;
        for (int64_t j = 0; j < n; j++) s += get(xdt, x.at(), (size_t)(r * n + j));
        s /= (double)n;
        for (int64_t j = 0; j < n; j++) q += pow(get(xdt, x.at(), (size_t)(r * n + j)) - s, 2);
        ((float *)mean.at())[r] = (float)s, ((float *)rstd.at())[r] = (float)(1 / sqrt(q / (double)n + 1e-5));
    }

    /* gx_add off, then on over the same old gx; gw and gb each time from gw0/gb0 */
    buf gx0(old), gx1(old), gwa(gw0), gba(gb0), gwb(gw0), gbb(gb0);
    launch(c, 0, gx0, gwa, gba, gout, x, w, mean, rstd);
    launch(c, 1, gx1, gwb, gbb, gout, x, w, mean, rstd);

    int64_t off_ref = 0, off_contract = 0, off_wb = 0;
    double worst = 0;
    std::vector<double> sgw((size_t)n, 0), sgb((size_t)n, 0), agw((size_t)n, 0);
    for (int64_t r = 0; r < rows; r++) {
        double m = ((float *)mean.at())[r], rs = ((float *)rstd.at())[r], s1 = 0, s2 = 0, mag = 0;
        std::vector<double> h((size_t)n), dh((size_t)n);
        for (int64_t j = 0; j < n; j++) {
            size_t i = (size_t)(r * n + j);
            double g = get(c.dt, gout.at(), i);
            h[(size_t)j] = (get(xdt, x.at(), i) - m) * rs;
            dh[(size_t)j] = c.with_w ? g * ((float *)w.at())[j] : g;
            s1 += dh[(size_t)j], s2 += dh[(size_t)j] * h[(size_t)j];
            sgw[(size_t)j] += g * h[(size_t)j], sgb[(size_t)j] += g, agw[(size_t)j] += fabs(g * h[(size_t)j]) + fabs(g);
            mag += fabs(dh[(size_t)j]) + fabs(dh[(size_t)j] * h[(size_t)j]);
        }
        double a = s1 / (double)n, cc = s2 / (double)n;
        for (int64_t j = 0; j < n; j++) {
            size_t i = (size_t)(r * n + j);
            double v = rs * (dh[(size_t)j] - a - h[(size_t)j] * cc);
            /* f32's error in v: its terms and the row sums behind a and c, each off by a few ulps */
            double err =
                1e-6 * rs *
                (fabs(dh[(size_t)j]) + fabs(a) + fabs(h[(size_t)j] * cc) + (1 + fabs(h[(size_t)j])) * mag / (double)n);
            double got = get(xdt, gx0.at(), i);
            double d = fabs(got - v) - half_ulp(xdt, fabs(got) > fabs(v) ? got : v);
            if (!(d <= err)) {
                if (off_ref < 3)
                    fprintf(stderr, "  %s: row %lld col %lld: gx %.9g, reference %.9g\n", c.name, (long long)r,
                            (long long)j, got, v);
                off_ref++;
            }
            if (d / (err + 1e-30) > worst) worst = d / (err + 1e-30);
            float want = round_to(xdt, (float)get(xdt, old.at(), i) + (float)got); /* TI(float(old) + float(TI(v))) */
            double have = get(xdt, gx1.at(), i);
            if (!(have == (double)want) && !(have != have && want != want)) {
                if (off_contract < 3)
                    fprintf(stderr, "  %s: row %lld col %lld: added gx %.9g, the contract %.9g (old %.9g, v %.9g)\n",
                            c.name, (long long)r, (long long)j, have, (double)want, get(xdt, old.at(), i), got);
                off_contract++;
            }
        }
    }
    for (int64_t j = 0; j < n; j++) {
        double base_w = c.write_wb ? 0 : ((float *)gw0.at())[j], base_b = c.write_wb ? 0 : ((float *)gb0.at())[j];
        double tol = 1e-6 * (agw[(size_t)j] + 1) * 4;
        for (buf *pw : { &gwa, &gwb }) off_wb += !(fabs(((float *)pw->at())[j] - (base_w + sgw[(size_t)j])) <= tol);
        for (buf *pb : { &gba, &gbb }) off_wb += !(fabs(((float *)pb->at())[j] - (base_b + sgb[(size_t)j])) <= tol);
    }
    CHECK(off_ref == 0, "%s: %lld of %zu gx elements off the double reference", c.name, (long long)off_ref, total);
    CHECK(off_contract == 0, "%s: %lld of %zu added gx elements differ from TI(old + TI(v))", c.name,
          (long long)off_contract, total);
    CHECK(off_wb == 0, "%s: %lld weight/bias gradient sums off the reference", c.name, (long long)off_wb);
    CHECK(gx0.slack_intact() && gx1.slack_intact() && gwa.slack_intact() && gwb.slack_intact() && gba.slack_intact() &&
              gbb.slack_intact(),
          "%s: a kernel wrote outside its arrays", c.name);
    printf("%-44s %3lld x %-5lld gx worst %.2f of its tolerance\n", c.name, (long long)rows, (long long)n, worst);
}

int main() {
    const int B = VK_BF16, H = VK_F16, F = VK_F32;
    std::vector<ln_case> cs = {
        /* the pair, warp path (16-bit, n % 256 == 0, n <= VK_LN_WARP_MAX) */
        { "pair warp bf16 n256", PAIR, B, 0, 24, 256, 1, 0, 0 },
        { "pair warp f16 n512", PAIR, H, 0, 24, 512, 1, 0, 0 },
        { "pair warp bf16 n768 no weight", PAIR, B, 0, 20, 768, 0, 0, 0 },
        { "pair warp bf16 n1024 zeroing gw/gb", PAIR, B, 0, 17, 1024, 1, 1, 0 },
        { "pair warp f16 n1024", PAIR, H, 0, 9, 1024, 1, 0, 0 },
        /* the pair, block path (other widths, misaligned gx, f32) */
        { "pair block bf16 n64", PAIR, B, 0, 7, 64, 1, 0, 0 },
        { "pair block f16 n200", PAIR, H, 0, 7, 200, 1, 0, 0 },
        { "pair block bf16 n1600 zeroing gw/gb", PAIR, B, 0, 5, 1600, 1, 1, 0 },
        { "pair block bf16 n1280 (past the warp max)", PAIR, B, 0, 4, 1280, 1, 0, 0 },
        { "pair block f16 n512 gx misaligned", PAIR, H, 0, 6, 512, 1, 0, 1 },
        { "pair block f32 n200", PAIR, F, 0, 7, 200, 1, 0, 0 },
        /* the _mixed pair: f32 x and gx, 16-bit gout */
        { "pair mixed warp bf16 n512", PAIR, B, 1, 20, 512, 1, 0, 0 },
        { "pair mixed warp f16 n1024", PAIR, H, 1, 9, 1024, 1, 0, 0 },
        { "pair mixed block bf16 n200", PAIR, B, 1, 7, 200, 1, 0, 0 },
        { "pair mixed block f16 n1600 no weight", PAIR, H, 1, 5, 1600, 0, 0, 0 },
        /* the one-pass kernel (16-bit gout, n % 8 == 0, n <= VK_LN_WARP_MAX) and its _mixed form */
        { "fused bf16 n64", FUSED, B, 0, 40, 64, 1, 0, 0 },
        { "fused f16 n200", FUSED, H, 0, 36, 200, 1, 0, 0 },
        { "fused bf16 n1024", FUSED, B, 0, 34, 1024, 1, 0, 0 },
        { "fused mixed bf16 n768", FUSED, B, 1, 20, 768, 1, 0, 0 },
        { "fused mixed f16 n1000", FUSED, H, 1, 18, 1000, 1, 0, 0 },
    };
    for (const ln_case &c : cs) run_case(c);
    return check_done();
}
