/* float_dispatch.h — one kernel body for float and double, shared by the CPU kernels (C) and the
 * GPU kernels (CUDA C++): VRAM_FLOAT_DISPATCH(is_f32, body) runs `body` with T = float when
 * is_f32, else with T = double. The branch is uniform, so its cost is one compare a call. */
#ifndef VRAM_FLOAT_DISPATCH_H
#define VRAM_FLOAT_DISPATCH_H

#define VRAM_FLOAT_DISPATCH(is_f32, ...)                                                           \
    do {                                                                                           \
        if (is_f32) {                                                                              \
            typedef float T;                                                                       \
            __VA_ARGS__                                                                            \
        } else {                                                                                   \
            typedef double T;                                                                      \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    } while (0)

#endif
