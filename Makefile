# The two commands of the README, over CMake:
#   make run    builds and runs the main job
#   make test   builds (plain and with ASan+UBSan) and runs every test through CTest, then the
#               multithreaded ones (label `threads`) under ThreadSanitizer. The sanitizer build
#               leaves nvcc out (GPU code is not host code), so it also checks a build without it.
# Builds are quiet: CMake's notes and warnings and the compilers' warnings and errors show,
# the per-file progress, "Built target" and make's Entering/Leaving directory lines do not
# (VERBOSE=1 shows everything).
BUILD ?= build
SAN_BUILD ?= build-san
TSAN_BUILD ?= build-tsan
SRC ?= .
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SHELL := /bin/bash
MAKEFLAGS += --no-print-directory

# $(call quiet_build,BUILD_DIR,CONFIGURE_ARGS,BUILD_ARGS)
ifeq ($(VERBOSE),)
define quiet_build
	@echo "building $(1)/ (only warnings and errors are shown)"
	@cmake -S $(SRC) -B $(1) --log-level=NOTICE -DCMAKE_RULE_MESSAGES=OFF $(2) >/dev/null
	@set -o pipefail; cmake --build $(1) -j $(JOBS) $(3) | { grep -v '^\[ *[0-9]*%\] Built target' || true; }
endef
else
define quiet_build
	cmake -S $(SRC) -B $(1) -DCMAKE_RULE_MESSAGES=ON $(2)
	cmake --build $(1) -j $(JOBS) $(3)
endef
endif

.PHONY: all build build-san build-tsan run test test-plain test-san test-tsan bench clean

all: build

build:
	$(call quiet_build,$(BUILD),-DCMAKE_BUILD_TYPE=Release)

build-san:
	$(call quiet_build,$(SAN_BUILD),-DCMAKE_BUILD_TYPE=Debug -DVRAM_SANITIZE=ON -DVRAM_NVCC=VRAM_NVCC-NOTFOUND)

build-tsan:
	$(call quiet_build,$(TSAN_BUILD),-DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRAM_SANITIZE_THREAD=ON,--target test_alloc_streams test_cuda_fake test_lock fake_cuda)

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
