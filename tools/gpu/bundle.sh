#!/bin/bash
# Packs, on a build machine without a GPU, what a lent GPU machine needs to run the CUDA device
# tests and benchmarks in one call (the session's device time is short; that machine has nvcc
# but none of this project's Debian libraries and no ../shared). Writes .gpu/bitnet-gpu.tar.xz
# (git-ignored): the gpu-labelled test binaries, `bitnet` and `bitnet_cuda_bench` built for one
# architecture, the shared libraries they load beyond glibc and libstdc++, and the test data
# they read from ../shared (SmolLM2, 98 MB, is left out: its cases skip). Then, through the
# device tool:  run(command="CHECK_SECONDS=300 tools/gpu/check.sh", carry=[".gpu"], timeout_s=330)
#   tools/gpu/bundle.sh            # sm_90 (H100, H200)
#   BITNET_GPU_ARCH=80 tools/gpu/bundle.sh
#   BITNET_GPU_BASE=1 tools/gpu/bundle.sh   # first keep the last bundle's bitnet as .gpu/bitnet-base
#                                           # (check.sh's ab step runs it against the new one)
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=${BITNET_GPU_ARCH:-90}
shared=${SHARED:-../shared}
build=${BITNET_GPU_BUILD:-build-gpu}
root=/tmp/bitnet-gpu  # where check.sh unpacks it on the device machine; the tests read their data there
tests="cuda_probe_test cuda_kernels_test cuda_backend_ops_test cuda_backend_test e2e_golden_gpu_test"
tools="bitnet bitnet_cuda_bench"

if [ "${BITNET_GPU_BASE:-0}" = 1 ]; then
  if [ -x "$build/bin/bitnet" ]; then
    mkdir -p .gpu
    cp "$build/bin/bitnet" .gpu/bitnet-base
    strip .gpu/bitnet-base
    echo "bundle: the previous build's bitnet kept as .gpu/bitnet-base"
  else
    echo "bundle: no previous build ($build/bin/bitnet) to keep as the base" >&2
  fi
else
  rm -f .gpu/bitnet-base  # a base of an older bundle would mislead the ab step
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DBITNET_OPENCL=OFF -DBITNET_VULKAN=OFF -DBITNET_HIP=OFF -DBITNET_SHARED_DIR="$root/shared" >/dev/null
cmake --build "$build" -j "$(nproc)" --target $tests $tools

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg="$stage/bitnet-gpu"
mkdir -p "$pkg/bin" "$pkg/lib" "$pkg/shared/models" "$pkg/shared/golden"
for t in $tests $tools; do
  cp "$build/bin/$t" "$pkg/bin/"
  strip "$pkg/bin/$t"
done
# Every library the binaries load, except glibc's and the C++ runtime (the device image's are
# as new or newer); the CUDA runtime is linked in statically and the driver is the machine's.
for t in "$pkg"/bin/*; do ldd "$t"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" "$pkg/lib/"; done
if [ -d "$shared/models" ]; then
  cp "$shared/models/stories260K-v1.gguf" "$pkg/shared/models/"
  for d in llamacpp bitnetcpp ik_llama; do
    mkdir -p "$pkg/shared/golden/$d"
    find "$shared/golden/$d" -maxdepth 1 -type f ! -name 'smollm2*' -exec cp {} "$pkg/shared/golden/$d/" \;
  done
else
  echo "bundle: no test data at $shared: the device tests that read models will skip" >&2
fi
git log -1 --format='%H %s' > "$pkg/COMMIT"
echo "$arch" > "$pkg/ARCH"
mkdir -p .gpu
tar -C "$stage" -cJf .gpu/bitnet-gpu.tar.xz bitnet-gpu
ls -l .gpu/bitnet-gpu.tar.xz
du -sh --apparent-size "$pkg"
