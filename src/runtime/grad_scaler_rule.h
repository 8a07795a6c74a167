/* grad_scaler_rule.h — GradScaler's update rule, one body for the CPU table (C) and the GPU
 * kernel (CUDA C++): state = {growth tracker, found_inf}. After an overflow the scale backs off
 * and the tracker restarts; after `interval` clean steps in a row the scale grows. */
#ifndef VRAM_GRAD_SCALER_RULE_H
#define VRAM_GRAD_SCALER_RULE_H

#include <stdint.h>

#ifdef __CUDACC__
#define VRAM_HOST_DEVICE __host__ __device__
#else
#define VRAM_HOST_DEVICE
#endif

static inline VRAM_HOST_DEVICE void vram_scaler_rule(float *scale, int32_t *state, double growth, double backoff,
                                                     int interval) {
    if (state[1]) {
        *scale = (float)(*scale * backoff);
        state[0] = 0;
    } else if (++state[0] >= interval) {
        *scale = (float)(*scale * growth);
        state[0] = 0;
    }
}

#endif
