#!/bin/bash
# Runs on a lent GPU machine, from the repository root, what tools/gpu/bundle.sh packed here:
#   run(command="CHECK_SECONDS=300 tools/gpu/check.sh", carry=[".gpu"], timeout_s=330)
# Each step has its own time limit and the whole run a deadline (CHECK_SECONDS, default 480),
# so a hung kernel costs one step, not the call. Logs go to $OUT (at most 8 files come back):
# summary.txt, gpu.txt, tests.log, bench.log, ab.log, profile.log, sanitizer.log; the summary is printed
# last.
# CHECK_STEPS picks steps (default: all, in this order):
#   devices probe kernels ops backend golden kbench bench q6k parallel ab profile sanitizer
# ab runs where .gpu/bitnet-base exists (bundle.sh with BITNET_GPU_BASE=1 keeps the previous
# bundle's bitnet there): that binary and this bundle's, alternating twice, pp128 + tg64 with
# the file's head and tg64 with a Q6_K head (ab.log; the rows in the summary).
set -u
start=$(date +%s)
deadline=$((start + ${CHECK_SECONDS:-480}))
out=${OUT:-/tmp/bitnet-gpu-out}
mkdir -p "$out"
root=/tmp/bitnet-gpu
rm -rf "$root"
if [ ! -f .gpu/bitnet-gpu.tar.xz ]; then
  echo "check: no bundle (.gpu/bitnet-gpu.tar.xz): run tools/gpu/bundle.sh and carry .gpu" >&2
  exit 2
fi
# tar needs xz for -J; python3 (there with PyTorch) reads it either way
tar -C /tmp -xJf .gpu/bitnet-gpu.tar.xz 2>/dev/null ||
  python3 -c 'import tarfile; tarfile.open(".gpu/bitnet-gpu.tar.xz").extractall("/tmp")' || exit 2
steps=${CHECK_STEPS:-devices probe kernels ops backend golden kbench bench q6k parallel ab profile sanitizer}
summary="$out/summary.txt"
{ echo "bundle $(cat "$root/COMMIT") (sm_$(cat "$root/ARCH"))"; date -u; } > "$summary"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem \
  --format=csv > "$out/gpu.txt" 2>&1
nvidia-smi >> "$out/gpu.txt" 2>&1
cat "$out/gpu.txt" | head -2 >> "$summary"

# step NAME LOG LIMIT CMD...: runs CMD line-buffered into LOG for at most LIMIT seconds or what is
# left before the deadline; one summary line per step, with its gtest counts and failed cases.
step() {
  local name=$1 log=$2 limit=$3
  shift 3
  case " $steps " in *" $name "*) ;; *) return 0 ;; esac
  local left=$((deadline - $(date +%s)))
  if [ "$left" -lt 10 ]; then
    echo "$name: not run (deadline)" >> "$summary"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$(date +%s)
  echo "=== $name: $* (limit ${limit}s)" >> "$log"
  timeout -k 5 "$limit" stdbuf -oL -eL "$@" >> "$log" 2>&1
  local rc=$?
  local what="rc=$rc"
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && what="TIMED OUT after ${limit}s"
  local counts
  counts=$(awk -v n="=== $name:" 'index($0, n) == 1 {on = 1; next} /^=== / {on = 0}
    on && /^\[  PASSED  \]/ {p = $4} on && /^\[  FAILED  \] [0-9]+ test/ {f = $4} on && /^\[  SKIPPED \] [0-9]+ test/ {s = $4}
    END {if (p != "" || f != "" || s != "") printf "passed %s, failed %s, skipped %s", p + 0, f + 0, s + 0}' "$log")
  echo "$name: $what, $(($(date +%s) - t0))s${counts:+, $counts}" >> "$summary"
  # the failing cases by name
  awk -v n="=== $name:" 'index($0, n) == 1 {on = 1; next} /^=== / {on = 0} on && /^\[  FAILED  \] [A-Za-z]/ {print "  " $0}' "$log" |
    sort -u | head -20 >> "$summary"
}

bin="$root/bin"
run=(env LD_LIBRARY_PATH="$root/lib" BITNET_STRICT_MODE=1)  # the bundle's libraries; no silent fallback to the CPU
case " $steps " in *" bench "* | *" q6k "* | *" parallel "* | *" ab "* | *" profile "*) steps="$steps synth" ;; esac
model=/tmp/2b4t-i2_s.gguf
step devices "$out/tests.log" 30 "${run[@]}" "$bin/bitnet" devices
# the cuda entry and its devices: available, or why not (then every test skips)
awk '/^cuda:/ {on = 1; print "  " $0; next} on && /^ / {print "  " $0; next} {on = 0}' "$out/tests.log" | head -6 >> "$summary"
step probe "$out/tests.log" 60 "${run[@]}" "$bin/cuda_probe_test"
step kernels "$out/tests.log" 120 "${run[@]}" "$bin/cuda_kernels_test"
step ops "$out/tests.log" 120 "${run[@]}" "$bin/cuda_backend_ops_test"
step backend "$out/tests.log" 120 "${run[@]}" "$bin/cuda_backend_test"
step golden "$out/tests.log" 120 "${run[@]}" "$bin/e2e_golden_gpu_test"
step kbench "$out/bench.log" 60 "${run[@]}" "$bin/bitnet_cuda_bench"
step synth "$out/bench.log" 60 "${run[@]}" "$bin/bitnet" synth -o "$model" --preset 2b4t --type i2_s
step bench "$out/bench.log" 120 "${run[@]}" "$bin/bitnet" bench -m "$model" --device cuda -p 128,512 -n 64 -r 3
# the head requantized to Q6_K at load (0.8 instead of 1.19 GB per token, bitnet.cpp's default)
step q6k "$out/bench.log" 60 "${run[@]}" "$bin/bitnet" bench -m "$model" --device cuda --head-type q6_K -p 0 -n 64 -r 3
step parallel "$out/bench.log" 90 "${run[@]}" "$bin/bitnet" bench -m "$model" --device cuda -p 0 -n 64 --parallel 1,8,32 -r 2
# The previous bundle's bitnet against this one, alternating (same model, same machine, minutes
# apart: the only fair comparison of a change).
if [ -x .gpu/bitnet-base ]; then
  step ab "$out/ab.log" 150 "${run[@]}" tools/gpu/ab.sh "$PWD/.gpu/bitnet-base" "$bin/bitnet" "$model"
  grep -E '^(==|\|)' "$out/ab.log" 2>/dev/null | awk -F'|' '/^==/ {w = $0; next} {printf "  %-16s %-6s %-6s %s\n", w, $6, $9, $10}' >> "$summary"
else
  case " $steps " in *" ab "*) echo "ab: not run (no .gpu/bitnet-base: bundle.sh with BITNET_GPU_BASE=1)" >> "$summary" ;; esac
fi
# Where the time goes per kernel (kernel_profile.h; plain launches, no graphs): a prompt of 512,
# then decode.
step profile "$out/profile.log" 90 "${run[@]}" BITNET_CUDA_PROFILE=1 "$bin/bitnet" bench -m "$model" --device cuda -p 512 -n 0 -r 1
step profile "$out/profile.log" 90 "${run[@]}" BITNET_CUDA_PROFILE=1 "$bin/bitnet" bench -m "$model" --device cuda -p 0 -n 32 -r 1
grep -A8 'profile (BITNET_CUDA_PROFILE)' "$out/profile.log" 2>/dev/null | sed 's/^/  /' >> "$summary"
if command -v compute-sanitizer >/dev/null; then
  step sanitizer "$out/sanitizer.log" 150 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 \
    "${run[@]}" "$bin/cuda_kernels_test"
else
  echo "sanitizer: not run (no compute-sanitizer)" >> "$summary"
fi
# the benchmark tables, then the summary: the reply shows the end of the output
grep -E '^\|' "$out/bench.log" | tail -20
grep -E 'GB/s' "$out/bench.log" | grep -v '^|' | tail -12
echo "total $(($(date +%s) - start))s"
cat "$summary"
