/* tensor.h — n-dimensional tensors whose storage comes from the caching allocator.
 *
 * A vram_runtime binds an allocator (alloc.h) to the kernel table of its device (a CPU table
 * today; a CUDA table slots in beside it) and holds the random state used by dropout and the
 * initialisers. A vram_tensor is a view: dtype, shape, strides (in elements) and an offset into
 * a reference-counted storage block. Views (reshape, transpose, slice in ops.h) share the
 * storage; the block goes back to the allocator when its last view is released.
 *
 * Every storage block carries an allocator tag saying what it holds (stats.h): parameters,
 * gradients, optimizer state, activations (op outputs saved for backward) or temporaries
 * (everything else an op produces), so the allocator's per-tag statistics say where memory
 * goes. An op output starts as a temporary; autograd re-tags it as an activation while a graph
 * node keeps it for backward, and back to a temporary when the node lets it go.
 *
 * Dtypes: f64, f32, f16, bf16, i32, i64, i8, u8. Arithmetic ops compute in f32 and f64; the
 * 16-bit float types are storage formats converted by vram_tensor_cast; integer tensors hold
 * indices (embedding, cross-entropy targets) and bytes (data batches).
 *
 * Reference counting: functions that return a tensor give the caller one reference;
 * vram_tensor_free drops one.
 */
#ifndef VRAM_TENSOR_H
#define VRAM_TENSOR_H

#include "vram/alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vram_dtype {
    VRAM_DTYPE_F64 = 0,
    VRAM_DTYPE_F32,
    VRAM_DTYPE_F16,
    VRAM_DTYPE_BF16,
    VRAM_DTYPE_I32,
    VRAM_DTYPE_I64,
    VRAM_DTYPE_I8,
    VRAM_DTYPE_U8,
    VRAM_DTYPE_COUNT
} vram_dtype;

enum { VRAM_TENSOR_MAX_DIMS = 6 };

typedef struct vram_runtime vram_runtime;
typedef struct vram_tensor vram_tensor;

/* Bytes per element and the short name ("f32", "bf16", ...). */
size_t vram_dtype_size(vram_dtype dtype);
const char *vram_dtype_name(vram_dtype dtype);
int vram_dtype_is_float(vram_dtype dtype);

/* A runtime over `a` (not owned). The kernel table is chosen from the allocator's device:
 * host-accessible devices (the host device) get the CPU table, cuda devices the GPU table
 * (kernels built by nvcc and loaded through the driver, products through cuBLASLt, all on one
 * compute stream; one GPU runtime per process); a device without a table (sim) gives
 * VRAM_ERR_UNSUPPORTED, and a GPU runtime whose driver, kernels or cuBLASLt are missing says
 * which. `threads` 0 = one per online
 * CPU (for the matrix product). A runtime and its tensors are used by one thread at a time
 * (the random state is not locked); the allocator underneath is thread safe. */
vram_status vram_runtime_new(vram_allocator *a, int threads, vram_runtime **out);
void vram_runtime_free(vram_runtime *rt);
/* Waits for the device's queued work and returns the first error of a kernel, copy or matrix
 * product since the runtime opened (GPU work is asynchronous and its errors sticky, as CUDA's
 * are: after one, later work is skipped). Always VRAM_OK on the CPU. */
vram_status vram_runtime_sync(vram_runtime *rt);
/* 1 when the runtime's tensors live in GPU memory (vram_tensor_data is then a device address). */
int vram_runtime_on_gpu(const vram_runtime *rt);
vram_allocator *vram_runtime_allocator(vram_runtime *rt);
/* Calls fn(ctx, status) after every allocation the runtime makes, failed ones included (fn NULL:
 * none), so a tool can read the allocator's statistics at the moment of a peak or of an
 * out-of-memory failure, before the failing op has freed what it held (the planner, vram train's
 * out-of-memory explanation). */
void vram_runtime_set_alloc_observer(vram_runtime *rt, void (*fn)(void *ctx, vram_status status), void *ctx);
const char *vram_runtime_device_name(vram_runtime *rt);
/* On the GPU, which attention ran the flash-attention calls so far, in words, into buf (cuDNN's
 * fused attention, the runtime's own kernels, or both and why); NULL on the CPU or where no such
 * call has run. */
const char *vram_runtime_attention_report(vram_runtime *rt, char *buf, size_t cap);

/* Random state (xoshiro256**), used by dropout and initialisers. get/set let checkpointing
 * replay a segment with the same random numbers. */
void vram_runtime_seed(vram_runtime *rt, uint64_t seed);
void vram_runtime_rng_get(vram_runtime *rt, uint64_t state[4]);
void vram_runtime_rng_set(vram_runtime *rt, const uint64_t state[4]);
double vram_runtime_uniform(vram_runtime *rt); /* in [0, 1) */
double vram_runtime_normal(vram_runtime *rt);  /* standard normal */

/* A new contiguous tensor filled with zeros, its storage tagged `tag`. */
vram_status vram_tensor_new(vram_runtime *rt, vram_dtype dtype, int ndim, const int64_t *shape,
                            vram_tag tag, vram_tensor **out);
/* A new tensor holding a copy of `data` (contiguous, row-major, of `dtype`). */
vram_status vram_tensor_from_data(vram_runtime *rt, vram_dtype dtype, int ndim, const int64_t *shape,
                                  vram_tag tag, const void *data, vram_tensor **out);
/* Drops one reference (NULL is fine). */
void vram_tensor_free(vram_tensor *t);
/* Adds one reference and returns `t`. */
vram_tensor *vram_tensor_retain(vram_tensor *t);

vram_runtime *vram_tensor_runtime(const vram_tensor *t);
vram_dtype vram_tensor_dtype(const vram_tensor *t);
int vram_tensor_ndim(const vram_tensor *t);
const int64_t *vram_tensor_shape(const vram_tensor *t);
const int64_t *vram_tensor_strides(const vram_tensor *t);
int64_t vram_tensor_numel(const vram_tensor *t);
int vram_tensor_is_contiguous(const vram_tensor *t);
/* Address of element [0,...,0]: a host address on the CPU, a device address on the GPU. */
void *vram_tensor_data(const vram_tensor *t);
/* Bytes of the storage block behind the tensor, and its tag. */
size_t vram_tensor_storage_bytes(const vram_tensor *t);
vram_tag vram_tensor_tag(const vram_tensor *t);
/* Re-tags the storage block (e.g. a model's tensors as parameters). */
vram_status vram_tensor_set_tag(vram_tensor *t, vram_tag tag);

/* Element access by index (any dtype, through double). */
vram_status vram_tensor_get(const vram_tensor *t, const int64_t *index, double *value);
vram_status vram_tensor_set(vram_tensor *t, const int64_t *index, double value);
/* The single value of a one-element tensor. */
double vram_tensor_item(const vram_tensor *t);
/* Copies a contiguous tensor's elements from / to host memory (numel x element size bytes),
 * on any device. Errors on the GPU are reported by vram_runtime_sync. */
void vram_tensor_write_host(vram_tensor *t, const void *host);
void vram_tensor_read_host(const vram_tensor *t, void *host);
/* Copies every element, in row-major order, into out[numel] as doubles. */
vram_status vram_tensor_to_f64(const vram_tensor *t, double *out);
/* Sets every element to `value` / copies `src` into `dst` (same shape; dtype converted). */
vram_status vram_tensor_fill(vram_tensor *t, double value);
vram_status vram_tensor_copy(vram_tensor *dst, const vram_tensor *src);
/* A contiguous copy in `dtype` (f16/bf16 round to nearest even). Not differentiable. */
vram_status vram_tensor_cast(const vram_tensor *t, vram_dtype dtype, vram_tag tag, vram_tensor **out);
/* Formats "[2, 3, 4]" into buf. */
const char *vram_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
