/* flash_emulator.h — just enough of CUDA, on the CPU, to run cuda_flash_attention.cuh's kernels
 * (test_flash_emulated.cpp; also the optimizer's list kernels, test_optim_emulated.cpp, layer
 * norm's, test_ln_emulated.cpp, and the classifier's cross-entropy, test_ce_emulated.cpp): a block is `threads` OS threads (up to
 * 1024; __syncthreads a barrier), one block at a time; the warp-wide instructions (mma.sync
 * m16n8k16, ldmatrix x4 and its .trans form, a float or double shuffle) exchange the lanes'
 * operands through per-warp slots between two warp barriers and apply PTX's fragment layouts,
 * so a wrong layout or index in a kernel gives wrong numbers here as on the GPU. cp.async
 * either copies at once (`cp_early`) or at the wait that retires its group (a read before that
 * wait sees stale memory). bf16 and f16 round to nearest even in software; products accumulate
 * in double, rounded to float per mma; __expf is computed as the GPU computes it (below), but
 * not to its bits. __shared__ becomes `static`: with one block at a time, the kernel's static
 * array is the block's shared memory. Last it includes src/runtime/cuda_device_helpers.cuh, the
 * helpers cuda_kernels.cu defines before its kernels, so the tests run those, not copies.
 */
#ifndef VRAM_TESTS_FLASH_EMULATOR_H
#define VRAM_TESTS_FLASH_EMULATOR_H

#include <atomic>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define VRAM_FA_EMULATED 1
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

struct emu_dim3 {
    unsigned x = 0;
};
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 blockDim, gridDim;

static inline float emu_bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
struct __nv_bfloat16 {
    uint16_t x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) {
        uint32_t u;
        memcpy(&u, &f, 4);
        x = (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0 : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
    }
    operator float() const { return emu_bits_float((uint32_t)x << 16); }
};
struct __half {
    uint16_t x;
    __half() = default;
    __half(float f) {
        uint32_t u, sign;
        memcpy(&u, &f, 4);
        sign = (u >> 16) & 0x8000u;
        float a = fabsf(f);
        if (a != a) x = (uint16_t)(sign | 0x7e00u);
        else if (a >= 65520.0f) x = (uint16_t)(sign | 0x7c00u);
        else if (a < 0x1p-14f) x = (uint16_t)(sign | (uint32_t)nearbyintf(a * 0x1p24f)); /* subnormal */
        else {
            uint32_t ua = u & 0x7fffffffu, h = (ua >> 13) - (112u << 10), rem = ua & 0x1fffu;
            x = (uint16_t)(sign | (h + (rem > 0x1000u || (rem == 0x1000u && (h & 1)))));
        }
    }
    operator float() const {
        int e = (x >> 10) & 0x1f, m = x & 0x3ff;
        float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(1024 + m), e - 25);
        return x & 0x8000 ? -v : v;
    }
};
struct __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
struct __half2 {
    __half x, y;
};
static inline __nv_bfloat16 __float2bfloat16(float x) { return __nv_bfloat16(x); }
static inline __half __float2half(float x) { return __half(x); }
static inline float __half2float(__half h) { return (float)h; }
static inline __half __ushort_as_half(unsigned short u) {
    __half h;
    h.x = u;
    return h;
}
static inline unsigned short __half_as_ushort(__half h) { return h.x; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.x; }
static inline float __uint_as_float(unsigned int u) { return emu_bits_float(u); }
/* __expf is ex2.approx.ftz of x * log2(e) on the GPU: the same product rounded to float, then
 * the host's exp2f (within ex2.approx's 2 ulp of it, not its bits) with subnormals flushed.
 * (A macro: glibc declares a __expf of its own.) */
#define __expf emu_fast_expf
static inline float emu_fast_expf(float x) {
    float r = exp2f(x * 1.44269504088896341f);
    return fabsf(r) < 0x1p-126f ? 0.0f : r;
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__nv_bfloat16(a), __nv_bfloat16(b)}; }
static inline __half2 __floats2half2_rn(float a, float b) { return {__half(a), __half(b)}; }
struct float2 {
    float x, y;
};
struct float4 {
    float x, y, z, w;
};
struct uint2 {
    uint32_t x, y;
};
struct __align__(16) uint4 {
    uint32_t x, y, z, w;
};
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }
static inline uint4 __ldcs(const uint4 *p) { return *p; } /* (a streaming load: only a cache hint) */
static inline float2 make_float2(float a, float b) { return {a, b}; }
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
static inline uint2 make_uint2(uint32_t a, uint32_t b) { return {a, b}; }

/* A barrier of n threads. On Linux the waiters sleep on a futex of the generation word, so a
 * release wakes them without each retaking a mutex (a 1024-thread block would queue on one). */
#ifdef __linux__
struct emu_barrier {
    std::atomic<int> count{0}, gen{0};
    int n;
    explicit emu_barrier(int n_) : n(n_) {}
    void wait() {
        int g = gen.load(std::memory_order_acquire);
        if (count.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
            count.store(0, std::memory_order_relaxed); /* before the release: no one re-enters earlier */
            gen.fetch_add(1, std::memory_order_release);
            syscall(SYS_futex, (int *)&gen, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
            return;
        }
        while (gen.load(std::memory_order_acquire) == g)
            syscall(SYS_futex, (int *)&gen, FUTEX_WAIT_PRIVATE, g, nullptr, nullptr, 0);
    }
};
#else
struct emu_barrier {
    std::mutex m;
    std::condition_variable cv;
    int n, count = 0;
    uint64_t gen = 0;
    explicit emu_barrier(int n_) : n(n_) {}
    void wait() {
        std::unique_lock<std::mutex> l(m);
        uint64_t g = gen;
        if (++count == n) {
            count = 0, gen++;
            cv.notify_all();
            return;
        }
        cv.wait(l, [&] { return gen != g; });
    }
};
#endif
struct emu_warp { /* one warp's exchange slots */
    emu_barrier bar{32};
    const void *addr[32];
    uint32_t a[32][4], b[32][2];
    float c[32][4], f[2][32];
    double d[2][32];
};
static emu_barrier *emu_block_bar;
static emu_warp emu_warps[32];
static std::mutex emu_atomic_mu;
static int emu_cp_early; /* cp.async copies at issue (1) or at the retiring wait (0) */
struct emu_cp {
    void *dst;
    const void *src;
    bool valid;
    int bytes;
};
static thread_local std::vector<std::vector<emu_cp>> emu_cp_groups;
static thread_local std::vector<emu_cp> emu_cp_open;

static inline void __syncthreads() { emu_block_bar->wait(); }
static inline void emu_cp_do(const emu_cp &c) {
    if (c.valid) memcpy(c.dst, c.src, c.bytes);
    else memset(c.dst, 0, c.bytes);
}

namespace fa {
inline void emu_cp_issue(void *dst, const void *src, bool valid, int bytes) {
    emu_cp c{dst, src, valid, bytes};
    if (emu_cp_early) emu_cp_do(c);
    else emu_cp_open.push_back(c);
}
inline void cp_async16(void *dst, const void *src, bool valid) { emu_cp_issue(dst, src, valid, 16); }
inline void cp_async4(void *dst, const void *src, bool valid) { emu_cp_issue(dst, src, valid, 4); }
inline void cp_async_commit() {
    emu_cp_groups.push_back(emu_cp_open);
    emu_cp_open.clear();
}
template <int N> inline void cp_async_wait() {
    while ((int)emu_cp_groups.size() > N) {
        for (const emu_cp &c : emu_cp_groups.front()) emu_cp_do(c);
        emu_cp_groups.erase(emu_cp_groups.begin());
    }
}
/* ldmatrix x4: lanes 8i..8i+7 give the rows of matrix i; lane l receives row l/4, columns
 * 2(l%4) and 2(l%4)+1 of each (with .trans: column l/4, rows 2(l%4) and 2(l%4)+1). */
inline void emu_ldsm(uint32_t r[4], const void *p, bool trans) {
    int l = threadIdx.x & 31, g = l >> 2, q = l & 3;
    emu_warp &w = emu_warps[threadIdx.x >> 5];
    w.addr[l] = p;
    w.bar.wait();
    for (int i = 0; i < 4; i++) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t *row = (const uint16_t *)w.addr[8 * i + g];
            lo = row[2 * q], hi = row[2 * q + 1];
        } else {
            lo = ((const uint16_t *)w.addr[8 * i + 2 * q])[g], hi = ((const uint16_t *)w.addr[8 * i + 2 * q + 1])[g];
        }
        r[i] = lo | (uint32_t)hi << 16;
    }
    w.bar.wait();
}
inline void ldsm_x4(uint32_t r[4], const void *p) { emu_ldsm(r, p, false); }
inline void ldsm_x4_trans(uint32_t r[4], const void *p) { emu_ldsm(r, p, true); }
template <typename T> inline float emu_half_of(uint32_t r, int hi) {
    uint16_t u = (uint16_t)(hi ? r >> 16 : r & 0xffffu);
    T t;
    memcpy(&t, &u, 2);
    return (float)t;
}
/* mma.sync m16n8k16 row.col: lane (g = l/4, q = l%4) holds A[g][2q..], A[g+8][2q..],
 * A[g][2q+8..], A[g+8][2q+8..]; B[2q..][g], B[2q+8..][g]; C[g][2q..], C[g+8][2q..]. */
template <typename T> inline void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    int l = threadIdx.x & 31;
    emu_warp &w = emu_warps[threadIdx.x >> 5];
    memcpy(w.a[l], a, 16), memcpy(w.c[l], c, 16);
    w.b[l][0] = b0, w.b[l][1] = b1;
    w.bar.wait();
    float A[16][16], B[16][8], C[16][8];
    for (int t = 0; t < 32; t++) {
        int g = t >> 2, q = t & 3;
        for (int h = 0; h < 2; h++) {
            A[g][2 * q + h] = emu_half_of<T>(w.a[t][0], h), A[g + 8][2 * q + h] = emu_half_of<T>(w.a[t][1], h);
            A[g][2 * q + 8 + h] = emu_half_of<T>(w.a[t][2], h), A[g + 8][2 * q + 8 + h] = emu_half_of<T>(w.a[t][3], h);
            B[2 * q + h][g] = emu_half_of<T>(w.b[t][0], h), B[2 * q + 8 + h][g] = emu_half_of<T>(w.b[t][1], h);
            C[g][2 * q + h] = w.c[t][h], C[g + 8][2 * q + h] = w.c[t][2 + h];
        }
    }
    for (int e = 0; e < 4; e++) {
        int row = (l >> 2) + (e >> 1) * 8, col = 2 * (l & 3) + (e & 1);
        double acc = C[row][col];
        for (int k = 0; k < 16; k++) acc += (double)A[row][k] * B[k][col];
        c[e] = (float)acc;
    }
    w.bar.wait();
}
} /* namespace fa */

/* A shuffle: each lane writes its value into this shuffle's half of the warp's slots, one warp
 * barrier, then reads its partner's. Successive shuffles alternate halves, so one barrier is
 * enough: a lane writes a half again only two shuffles later, after the barrier between that
 * every lane passes once it has read this one. */
static thread_local int emu_shfl_half;
template <typename V> static inline V emu_shfl_xor(V (*slots)[32], V v, int o) {
    int l = threadIdx.x & 31, h = emu_shfl_half;
    emu_shfl_half ^= 1;
    slots[h][l] = v;
    emu_warps[threadIdx.x >> 5].bar.wait();
    return slots[h][l ^ o];
}
static inline float __shfl_xor_sync(unsigned, float v, int o) {
    return emu_shfl_xor(emu_warps[threadIdx.x >> 5].f, v, o);
}
static inline double __shfl_xor_sync(unsigned, double v, int o) {
    return emu_shfl_xor(emu_warps[threadIdx.x >> 5].d, v, o);
}
static inline float atomicAdd(float *p, float v) {
    std::lock_guard<std::mutex> g(emu_atomic_mu);
    float o = *p;
    *p += v;
    return o;
}
static inline double atomicAdd(double *p, double v) {
    std::lock_guard<std::mutex> g(emu_atomic_mu);
    double o = *p;
    *p += v;
    return o;
}

/* The round-to-nearest intrinsics (never fused into a neighbouring op on the GPU). The float
 * product goes through double, where it is exact, so that one rounding gives __fmul_rn's bits
 * even where the host compiler may contract; the tests build for the baseline x86-64, without FMA. */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return (float)((double)a * (double)b); }
static inline double __dmul_rn(double a, double b) { return a * b; }

/* What cuda_kernels.cu defines before including the headers: the kernels' shared helpers, the
 * same source the GPU compiles (over the built-ins above). */
#include "../src/runtime/cuda_abi.h"
/* DISPATCH_ALL gives every branch an accumulate type A that a kernel need not use (nvcc does not
 * warn about it; the host compiler under -Werror would). */
#pragma GCC diagnostic ignored "-Wunused-local-typedefs"
#include "../src/runtime/cuda_device_helpers.cuh"

/* Runs `body` as `blocks` blocks of `threads` threads (at most 1024), one block after another
 * on the same threads (a barrier between blocks); returns how many times a thread ended a
 * block with cp.async copies never waited for. */
static inline int emu_launch(int64_t blocks, int threads, const std::function<void()> &body) {
    int leftover = 0;
    gridDim.x = (unsigned)blocks, blockDim.x = (unsigned)threads;
    emu_barrier bar(threads);
    emu_block_bar = &bar;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++)
        ts.emplace_back([&, t] {
            threadIdx.x = (unsigned)t;
            for (int64_t b = 0; b < blocks; b++) {
                blockIdx.x = (unsigned)b;
                emu_cp_groups.clear(), emu_cp_open.clear();
                body();
                if (!emu_cp_groups.empty() || !emu_cp_open.empty()) {
                    std::lock_guard<std::mutex> g(emu_atomic_mu);
                    leftover++;
                }
                bar.wait(); /* the block's shared memory is the next block's */
            }
        });
    for (std::thread &t : ts) t.join();
    return leftover;
}

#endif
