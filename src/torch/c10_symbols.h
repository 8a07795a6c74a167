/* c10_symbols.h — the few symbols of PyTorch's c10 library that libvram_torch.so uses, found at
 * run time in the libraries PyTorch has already loaded (this library links no libtorch):
 * c10::OutOfMemoryError, to throw, and the profiler's memory hooks, to report to. */
#ifndef VRAM_TORCH_C10_SYMBOLS_H
#define VRAM_TORCH_C10_SYMBOLS_H

#include <cstdint>
#include <string>

#include "vram/alloc.h"

namespace c10_symbols {

/* Finds the symbols in torch_lib_dir's loaded libraries (libc10_cuda, libc10, libtorch_*).
 * Returns true when c10::OutOfMemoryError can be thrown; else false with *error saying what is
 * missing (the profiler's hooks are taken wherever found, independently). */
bool resolve(const char *torch_lib_dir, std::string *error);

/* Throws c10::OutOfMemoryError with `msg` once resolved, else std::runtime_error. */
[[noreturn]] void throw_oom(const std::string &msg);

/* Tells PyTorch's profiler (when it records memory) that `bytes` were allocated at ptr
 * (negative: freed), or that an allocation of `bytes` ran out of memory, with a's totals. */
void report_usage(vram_allocator *a, int device, void *ptr, int64_t bytes);
void report_oom(vram_allocator *a, int device, int64_t bytes);

} // namespace c10_symbols

#endif
