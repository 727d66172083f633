# One-command entry points for a fresh Debian 12 machine (run as root):
#   make run    installs what is missing, builds, and generates text with the default model
#   make test   installs what is missing, builds, and runs the whole test suite (this machine,
#               then the CPU backend cross-compiled for Arm64 under qemu-user)
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
	libvulkan-dev mesa-vulkan-drivers vulkan-tools glslc spirv-tools libbenchmark-dev chromium nginx python3-venv
# Arm64: Debian's cross compiler and multiarch libraries; the tests run under qemu-user.
CROSS_PACKAGES := g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
	libgtest-dev:arm64 libgmock-dev:arm64 libfmt-dev:arm64 libssl-dev:arm64
ARM64_BUILD_DIR ?= build-arm64
# Emulated Arm64 CPUs: "max" has dotprod and i8mm, "cortex-a72" plain NEON.
ARM64_CPUS ?= max cortex-a72

.PHONY: all deps deps-arm64 build build-arm64 run test test-host test-arm64 pyenv clean

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

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DBITNET_SHARED_DIR=$(SHARED)

build: deps $(BUILD_DIR)/build.ninja
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
test: test-host test-arm64

# A Python environment for the tests that drive the server with PyPI clients (openai); best
# effort: without network access pip fails and those tests report skipped.
PYENV := $(BUILD_DIR)/pyenv
pyenv:
	@if [ ! -x $(PYENV)/bin/python ]; then \
	  /usr/bin/python3 -m venv $(PYENV) && \
	  ($(PYENV)/bin/pip install -q --disable-pip-version-check openai || \
	   echo "warning: pip could not install openai (no access to PyPI?): openai_client_test will be skipped" >&2); \
	fi

test-host: build pyenv
	cd $(BUILD_DIR) && XDG_RUNTIME_DIR=$${XDG_RUNTIME_DIR:-/tmp} ctest --output-on-failure -j $(JOBS) --timeout 1200

test-arm64: build-arm64
	@if [ -n "$$($(CROSS_MISSING))" ]; then echo "SKIPPED: Arm64 tests, missing: $$($(CROSS_MISSING))"; exit 0; fi; \
	cd $(ARM64_BUILD_DIR) && for cpu in $(ARM64_CPUS); do \
	  echo "== Arm64 tests under qemu-aarch64, QEMU_CPU=$$cpu"; \
	  QEMU_CPU=$$cpu ctest --output-on-failure -j $(JOBS) --timeout 600 || exit 1; \
	done

clean:
	rm -rf $(BUILD_DIR) $(ARM64_BUILD_DIR)
