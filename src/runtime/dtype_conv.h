/* dtype_conv.h — reading and writing one element of any dtype as a double, and the IEEE
 * half / bfloat16 conversions (round to nearest even), shared by tensor.c and the CPU kernels.
 */
#ifndef VRAM_DTYPE_CONV_H
#define VRAM_DTYPE_CONV_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vram/tensor.h"

static inline float vram_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t vram_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff);
    uint32_t man = x & 0x7fffff;
    if (exp == 255) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int32_t e = exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into exponent: fine */
    return (uint16_t)half;
}

static inline float vram_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t vram_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static inline double vram_load(const void *p, vram_dtype dt) {
    switch (dt) {
    case VRAM_DTYPE_F64: return *(const double *)p;
    case VRAM_DTYPE_F32: return *(const float *)p;
    case VRAM_DTYPE_F16: return vram_f16_to_f32(*(const uint16_t *)p);
    case VRAM_DTYPE_BF16: return vram_bf16_to_f32(*(const uint16_t *)p);
    case VRAM_DTYPE_I32: return *(const int32_t *)p;
    case VRAM_DTYPE_I64: return (double)*(const int64_t *)p;
    case VRAM_DTYPE_I8: return *(const int8_t *)p;
    case VRAM_DTYPE_U8: return *(const uint8_t *)p;
    default: return 0;
    }
}

static inline void vram_store(void *p, vram_dtype dt, double v) {
    switch (dt) {
    case VRAM_DTYPE_F64: *(double *)p = v; break;
    case VRAM_DTYPE_F32: *(float *)p = (float)v; break;
    case VRAM_DTYPE_F16: *(uint16_t *)p = vram_f32_to_f16((float)v); break;
    case VRAM_DTYPE_BF16: *(uint16_t *)p = vram_f32_to_bf16((float)v); break;
    case VRAM_DTYPE_I32: *(int32_t *)p = (int32_t)v; break;
    case VRAM_DTYPE_I64: *(int64_t *)p = (int64_t)v; break;
    case VRAM_DTYPE_I8: *(int8_t *)p = (int8_t)v; break;
    case VRAM_DTYPE_U8: *(uint8_t *)p = (uint8_t)v; break;
    default: break;
    }
}

#endif
