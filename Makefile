# frt - a thin front over CMake. See README.md.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
VERBOSE    ?=

SHELL := /bin/bash
# No "Entering directory" chatter from the nested makes CMake generates.
MAKEFLAGS += --no-print-directory

# What `make build` shows of CMake's build output: on a terminal one progress
# line rewritten in place ("[ 42%] Built target frt"), off a terminal nothing
# for the steps that went well; every other line (compiler warnings and
# errors, make's "*** Error" lines) is printed in full. VERBOSE=1 shows all.
BUILD_FILTER = awk -v tty=$$tty ' \
    /^\[ *[0-9]+%\] .*(Building|Linking|Built target)/ { if (tty) { printf "\r%s\033[K", $$0; fflush(); shown = 1 } next } \
    /^g?make(\[[0-9]+\])?: (Entering|Leaving) directory/ { next } \
    /^Consolidate compiler generated dependencies/ { next } \
    { if (shown) { printf "\n"; shown = 0 } print; fflush() } \
    END { if (shown) printf "\r\033[K" }'

.PHONY: all deps configure build test test-cpu test-gpu demo asan fuzz gpu-bundle clean

all: build

deps:
	@scripts/install-deps.sh

# Prints CMake's one-line summary ("frt: 0.1.0 RelWithDebInfo, CUDA backend
# off (cpu only)"); errors (stderr) in full.
configure: deps
	@set -o pipefail; cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS) | \
	    sed -n 's/^-- frt: /frt: /p'

build: configure
ifeq ($(VERBOSE),1)
	@cmake --build $(BUILD) -j $(JOBS)
else
	@tty=0; [ -t 1 ] && tty=1; set -o pipefail; cmake --build $(BUILD) -j $(JOBS) 2>&1 | $(BUILD_FILTER)
	@echo "frt: built $(BUILD)/frt ($$($(BUILD)/frt --version))"
endif

# The whole suite. GPU tests report "skipped" on a machine without a GPU.
test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-gpu: build
	@cd $(BUILD) && ctest --output-on-failure -L gpu

# The main job: the coding-agent capsule demo on the shipped demo model
# (cpu backend; `frt demo --backend cuda` on a GPU machine).
demo: build
	@$(BUILD)/frt demo

# CPU suite under AddressSanitizer + UndefinedBehaviorSanitizer: a Debug build
# (assertions on) at -O1, as the sanitizers' manuals advise (at -O0 the demo
# model's CPU prefills run ~10x slower still); tests/CMakeLists.txt multiplies
# the test time limits by FRT_TEST_TIMEOUT_SCALE (4) in this build.
asan:
	@$(MAKE) test BUILD=build-asan BUILD_TYPE=Debug \
	    CMAKE_ARGS="-DFRT_SANITIZE=ON -DFRT_CUDA=OFF '-DCMAKE_C_FLAGS_DEBUG=-g -O1'" \
	    ASAN_OPTIONS=allocator_may_return_null=1

# libFuzzer targets (clang); CI replays their seed corpora through the normal build.
fuzz:
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -DFRT_FUZZ=ON -DFRT_CUDA=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS)

# A stripped, self-contained folder for the GPU machine.
gpu-bundle: build
	@scripts/gpu-bundle.sh $(BUILD) gpu-bundle

clean:
	rm -rf build build-asan build-fuzz gpu-bundle gpu-bundle.tgz
