# frt - a thin front over CMake. See README.md.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all deps configure build test test-cpu test-gpu demo asan fuzz gpu-bundle clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

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
	@CC=clang cmake -S . -B build-fuzz -DFRT_FUZZ=ON -DFRT_CUDA=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS)

# A stripped, self-contained folder for the GPU machine.
gpu-bundle: build
	@scripts/gpu-bundle.sh $(BUILD) gpu-bundle

clean:
	rm -rf build build-asan build-fuzz gpu-bundle gpu-bundle.tgz
