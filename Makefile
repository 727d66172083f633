# One-command entry points for a fresh Debian 12 machine (run as root):
#   make run    installs what is missing, builds, and generates text with the default model
#   make test   installs what is missing, builds, and runs the whole test suite (this machine with
#               gcc; again with clang under AddressSanitizer + UBSan, then every libFuzzer target
#               for FUZZ_SECONDS each; then the CPU backend cross-compiled for Arm64 under qemu-user)
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
SHARED ?= $(abspath ../shared)
MODEL ?= models/tiny-stories-b158.gguf
PROMPT ?= Once upon a time
N_PREDICT ?= 100

APT_PACKAGES := build-essential cmake ninja-build pkg-config libfmt-dev nlohmann-json3-dev \
	libcli11-dev libcpp-httplib-dev libicu-dev libssl-dev libgtest-dev libgmock-dev python3 python3-numpy python3-jinja2 \
	ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo \
	libvulkan-dev mesa-vulkan-drivers vulkan-tools glslc spirv-tools libbenchmark-dev chromium nginx python3-venv \
	clang-14 libclang-rt-14-dev hipcc
# Arm64: Debian's cross compiler and multiarch libraries; the tests run under qemu-user.
CROSS_PACKAGES := g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
	libgtest-dev:arm64 libgmock-dev:arm64 libfmt-dev:arm64 libssl-dev:arm64
ARM64_BUILD_DIR ?= build-arm64
# Emulated Arm64 CPUs: "max" has dotprod and i8mm, "cortex-a72" plain NEON.
ARM64_CPUS ?= max cortex-a72

# The sanitizer build: clang (so the whole tree also compiles with the second compiler), every
# object with -fsanitize=address,undefined and libFuzzer's coverage hooks, the fuzz targets; GPU
# drivers (PoCL, lavapipe) stay out of it: they are not ours and not instrumented.
ASAN_BUILD_DIR ?= build-asan
ASAN_CXX ?= clang++-14
FUZZ_SECONDS ?= 20
# Tests left to the plain build: the two real-model golden runs (minutes under ASan, no code
# path of their own) and the browser and nginx tests (third-party processes).
ASAN_EXCLUDE ?= ^SmolLm2Golden\.|^Server\.WebPage|^Deploy\.
# The GPU backends (left out of the sanitizer build) and their tests compiled with clang too,
# not run (they run in the plain build): the whole tree compiles with both compilers.
CLANG_GPU_BUILD_DIR ?= build-clang-gpu

.PHONY: all deps deps-arm64 build build-arm64 build-asan build-clang-gpu run test test-host test-asan fuzz test-arm64 pyenv clean

all: build

# Installs only the packages that are missing (apt-get update first, as on a fresh machine).
deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The same for the Arm64 cross toolchain and multiarch libraries. Where apt cannot provide them
# (no arm64 in its sources), test-arm64 says so and is skipped instead of failing the host tests.
CROSS_MISSING = for p in $(CROSS_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done
deps-arm64:
	@dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
	@missing=$$($(CROSS_MISSING)); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing) || \
	    echo "warning: could not install the Arm64 cross toolchain ($$missing)" >&2; \
	fi

# Where Debian's hipcc is installed (APT_PACKAGES: ~42 MB to download, ~190 MB on disk on top of
# the rest, whose PoCL already brings clang-15), the CUDA backend is also built for AMD GPUs as
# the `hip` backend (-DBITNET_HIP=ON: kernels through hipcc, ~1 min; the binaries then need
# libamdhip64, which hipcc brings); HIP=0 builds without it. Checked when the recipes run, after deps has installed hipcc. nvcc, when
# present, is found by CMake itself.
HIP ?= 1
HIP_ON = [ "$(HIP)" != 0 ] && command -v hipcc >/dev/null 2>&1

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DBITNET_SHARED_DIR=$(SHARED) \
	  $$($(HIP_ON) && echo -DBITNET_HIP=ON)

# A build directory configured before hipcc was installed (or with another HIP=) is switched.
build: deps $(BUILD_DIR)/build.ninja
	@want=$$($(HIP_ON) && echo ON || echo OFF); \
	grep -q "^BITNET_HIP:BOOL=$$want" $(BUILD_DIR)/CMakeCache.txt || cmake $(BUILD_DIR) -DBITNET_HIP=$$want
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The CPU backend and the libraries under it, cross-compiled for Arm64 (static: qemu-user runs them).
build-arm64: deps-arm64
	@if [ -n "$$($(CROSS_MISSING))" ]; then echo "SKIPPED: Arm64 build, missing: $$($(CROSS_MISSING))"; exit 0; fi; \
	if [ ! -f $(ARM64_BUILD_DIR)/build.ninja ]; then \
	  cmake -S . -B $(ARM64_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DBITNET_SHARED_DIR=$(SHARED) \
	    -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DBITNET_CPU_KERNELS_ONLY=ON || exit 1; \
	fi; \
	cmake --build $(ARM64_BUILD_DIR) -j $(JOBS)

run: build
	@if [ ! -f "$(MODEL)" ]; then echo "error: model $(MODEL) not found; pass MODEL=path/to/model.gguf" >&2; exit 1; fi
	@echo "make run: model $(MODEL)" >&2
	$(BUILD_DIR)/bin/bitnet run -m $(MODEL) -p "$(PROMPT)" -n $(N_PREDICT) --temp 0

# lavapipe wants a runtime directory; PoCL and lavapipe both run on the CPU here.
test: test-host test-asan fuzz build-clang-gpu test-arm64

# A Python environment for the tests that drive the server with PyPI packages (openai,
# schemathesis); best effort: each is tried once, and without access to PyPI the tests that need
# it report skipped.
PYENV := $(BUILD_DIR)/pyenv
PY_PACKAGES := openai schemathesis
pyenv:
	@[ -x $(PYENV)/bin/python ] || /usr/bin/python3 -m venv $(PYENV)
	@for p in $(PY_PACKAGES); do \
	  $(PYENV)/bin/python -c "import $$p" 2>/dev/null || [ -f $(PYENV)/tried-$$p ] || { touch $(PYENV)/tried-$$p; \
	    $(PYENV)/bin/pip install -q --disable-pip-version-check $$p || \
	    echo "warning: pip could not install $$p (no access to PyPI?): the tests that use it will be skipped" >&2; }; \
	done

test-host: build pyenv
	cd $(BUILD_DIR) && XDG_RUNTIME_DIR=$${XDG_RUNTIME_DIR:-/tmp} ctest --output-on-failure -j $(JOBS) --timeout 1200

$(ASAN_BUILD_DIR)/build.ninja:
	cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=$(ASAN_CXX) \
	  -DBITNET_SHARED_DIR=$(SHARED) -DBITNET_BUILD_FUZZERS=ON -DBITNET_OPENCL=OFF -DBITNET_VULKAN=OFF

build-asan: deps $(ASAN_BUILD_DIR)/build.ninja
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)

# Any sanitizer report fails its test (the build stops on the first one, -fno-sanitize-recover);
# the server under ASan is driven by schemathesis from the plain build's Python environment.
test-asan: build-asan pyenv
	cd $(ASAN_BUILD_DIR) && XDG_RUNTIME_DIR=$${XDG_RUNTIME_DIR:-/tmp} \
	  UBSAN_OPTIONS=print_stacktrace=1 \
	  BITNET_SCHEMATHESIS_PYTHON=$(abspath $(PYENV))/bin/python BITNET_OPENAI_PYTHON=$(abspath $(PYENV))/bin/python \
	  ctest --output-on-failure -j $(JOBS) --timeout 1200 -E '$(ASAN_EXCLUDE)'

$(CLANG_GPU_BUILD_DIR)/build.ninja:
	cmake -S . -B $(CLANG_GPU_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=$(ASAN_CXX) \
	  -DBITNET_SHARED_DIR=$(SHARED)

build-clang-gpu: deps $(CLANG_GPU_BUILD_DIR)/build.ninja
	cmake --build $(CLANG_GPU_BUILD_DIR) -j $(JOBS) --target opencl_backend_test vulkan_backend_test

# Every libFuzzer target for FUZZ_SECONDS over its seeds and the corpus kept in build-asan/fuzz.
fuzz: build-asan
	tests/fuzz/run.sh $(ASAN_BUILD_DIR) $(FUZZ_SECONDS) $(SHARED)

test-arm64: build-arm64
	@if [ -n "$$($(CROSS_MISSING))" ]; then echo "SKIPPED: Arm64 tests, missing: $$($(CROSS_MISSING))"; exit 0; fi; \
	cd $(ARM64_BUILD_DIR) && for cpu in $(ARM64_CPUS); do \
	  echo "== Arm64 tests under qemu-aarch64, QEMU_CPU=$$cpu"; \
	  QEMU_CPU=$$cpu ctest --output-on-failure -j $(JOBS) --timeout 600 || exit 1; \
	done

clean:
	rm -rf $(BUILD_DIR) $(ARM64_BUILD_DIR) $(ASAN_BUILD_DIR) $(CLANG_GPU_BUILD_DIR)
