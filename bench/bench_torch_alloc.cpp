// bench_torch_alloc.cpp — docs/benchmarks.md §2 through PyTorch's CUDA allocators, from C++ with no
// Python in the loop: c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete on the default
// stream. Which allocator answers is PyTorch's choice at load time, from PYTORCH_CUDA_ALLOC_CONF:
//   (unset)                          native caching allocator
//   expandable_segments:True         native, expandable segments
//   backend:cudaMallocAsync          CUDA's stream-ordered pool allocator
// With the argument `cudamalloc` it times cudaMalloc + cudaFree directly instead (pairs only,
// fewer iterations: each call is tens of microseconds or more).
//
// Not part of the CMake build (it needs a PyTorch install); bench/run_gpu.sh builds it with g++
// against the torch package of the machine it runs on. bench_alloc_latency.c is the vram side.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace alloc = c10::cuda::CUDACachingAllocator;

static double now_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static uint64_t xs;
static uint64_t next_u64() {
  xs ^= xs << 13;
  xs ^= xs >> 7;
  xs ^= xs << 17;
  return xs;
}
static size_t draw_size() {
  uint64_t e = 8 + next_u64() % 19;
  return (size_t)((1ull << e) + next_u64() % (1ull << e));
}

int main(int argc, char** argv) {
  bool raw_cuda = argc > 1 && strcmp(argv[1], "cudamalloc") == 0;
  long pairs = raw_cuda ? 200 : 100000, repeat = 5;
  c10::cuda::set_device(0);
  if (!raw_cuda) alloc::init(c10::cuda::device_count());
  const char* conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  int driver = 0;
  cudaDriverGetVersion(&driver);
  printf("device: %s, CUDA driver API %d\n", prop.name, driver);
  printf("allocator: %s (PYTORCH_CUDA_ALLOC_CONF=%s)\n",
         raw_cuda ? "cudaMalloc+cudaFree" : alloc::name().c_str(), conf ? conf : "");
  auto do_alloc = [&](size_t n) -> void* {
    if (raw_cuda) {
      void* p = nullptr;
      return cudaMalloc(&p, n) == cudaSuccess ? p : nullptr;
    }
    return alloc::raw_alloc(n);
  };
  auto do_free = [&](void* p) {
    if (raw_cuda) cudaFree(p);
    else alloc::raw_delete(p);
  };

  const size_t sizes[] = {512, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
  for (size_t s : sizes) {
    for (int w = 0; w < (raw_cuda ? 10 : 1000); w++) do_free(do_alloc(s));
    std::vector<double> runs;
    for (long r = 0; r < repeat; r++) {
      double t0 = now_ns();
      for (long i = 0; i < pairs; i++) do_free(do_alloc(s));
      runs.push_back((now_ns() - t0) / pairs);
    }
    std::sort(runs.begin(), runs.end());
    printf("pair %10zu B: %10.1f ns/pair (median of %ld x %ld)\n", s, runs[repeat / 2], repeat, pairs);
  }
  if (raw_cuda) return 0;

  // Cold: the cache emptied before each run (the figure docs/benchmarks.md asks for: it includes
  // the device allocations). Warm: one untimed run first and the cache kept, so the timed runs
  // measure the allocator's own work on a cache that already holds the workload.
  for (int warm = 0; warm < 2; warm++) {
    const int SLOTS = 1000, OPS = 200000;
    std::vector<void*> slot(SLOTS);
    std::vector<double> runs;
    long long peak_res = 0, peak_alloc = 0;
    for (long r = -warm; r < repeat; r++) {
      std::fill(slot.begin(), slot.end(), nullptr);
      if (!warm) alloc::emptyCache();
      alloc::resetPeakStats(0);
      xs = 88172645463325252ull;
      double t0 = now_ns();
      for (int op = 0; op < OPS; op++) {
        uint64_t k = next_u64() % SLOTS;
        if (slot[k]) {
          alloc::raw_delete(slot[k]);
          slot[k] = nullptr;
        } else {
          slot[k] = alloc::raw_alloc(draw_size());
        }
      }
      if (r >= 0) runs.push_back((now_ns() - t0) / OPS);
      auto st = alloc::getDeviceStats(0);
      peak_res = st.reserved_bytes[0].peak;
      peak_alloc = st.allocated_bytes[0].peak;
      for (void* p : slot)
        if (p) alloc::raw_delete(p);
    }
    std::sort(runs.begin(), runs.end());
    printf("random%s: %8.1f ns/op (median of %ld; min %.1f, max %.1f), peak reserved %.2f GB, peak allocated %.2f GB\n",
           warm ? " warm" : "", runs[repeat / 2], repeat, runs[0], runs[repeat - 1], peak_res / 1e9, peak_alloc / 1e9);
  }
  return 0;
}
