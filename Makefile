# One-command entry points for a fresh Debian 12 machine (run as root):
#   make run    installs what is missing, builds, and generates text with the default model
#   make test   installs what is missing, builds, and runs the whole test suite
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
SHARED ?= $(abspath ../shared)
MODEL ?= models/tiny-stories-b158.gguf
PROMPT ?= Once upon a time
N_PREDICT ?= 100

APT_PACKAGES := build-essential cmake ninja-build pkg-config libfmt-dev nlohmann-json3-dev \
	libcli11-dev libicu-dev libssl-dev libgtest-dev libgmock-dev python3 python3-numpy \
	ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo \
	libvulkan-dev mesa-vulkan-drivers vulkan-tools glslc spirv-tools

.PHONY: all deps build run test clean

all: build

# Installs only the packages that are missing (apt-get update first, as on a fresh machine).
deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DBITNET_SHARED_DIR=$(SHARED)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@if [ ! -f "$(MODEL)" ]; then echo "error: model $(MODEL) not found; pass MODEL=path/to/model.gguf" >&2; exit 1; fi
	@echo "make run: model $(MODEL)" >&2
	$(BUILD_DIR)/bin/bitnet run -m $(MODEL) -p "$(PROMPT)" -n $(N_PREDICT) --temp 0

# lavapipe wants a runtime directory; PoCL and lavapipe both run on the CPU here.
test: build
	cd $(BUILD_DIR) && XDG_RUNTIME_DIR=$${XDG_RUNTIME_DIR:-/tmp} ctest --output-on-failure -j $(JOBS) --timeout 1200

clean:
	rm -rf $(BUILD_DIR)
