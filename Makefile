# The two commands of the README, over CMake:
#   make run    builds and runs the main job
#   make test   builds (plain and with ASan+UBSan) and runs every test through CTest, then the
#               multithreaded ones (label `threads`) under ThreadSanitizer. The sanitizer build
#               leaves nvcc out (GPU code is not host code), so it also checks a build without it.
BUILD ?= build
SAN_BUILD ?= build-san
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all build build-san build-tsan run test test-plain test-san test-tsan bench clean

all: build

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-san:
	@cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DVRAM_SANITIZE=ON -DVRAM_NVCC=VRAM_NVCC-NOTFOUND >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)

build-tsan:
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRAM_SANITIZE_THREAD=ON >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target test_alloc test_cuda_fake test_lock fake_cuda

# The main job, in two parts:
#  1. replay the bundled real PyTorch traces through the allocator on an 80 GiB simulated
#     device and print vram's peaks beside PyTorch's (and the smallest device that fits);
#  2. train a small GPT on the bundled corpus on the CPU, every byte through the allocator,
#     ending with the memory summary and the table of memory by category.
run: build
	./$(BUILD)/vram replay --fit traces/*.trace.gz
	./$(BUILD)/vram train --data $(BUILD)/data/kjv.txt --steps 300 --eval-every 100 --report

test-plain: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-san: build-san
	cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 VRAM_TEST_SANITIZED=1 ctest --output-on-failure -j $(JOBS)

test-tsan: build-tsan
	cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(JOBS) -L threads

test: test-plain test-san test-tsan

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(TSAN_BUILD)
