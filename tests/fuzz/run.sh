#!/usr/bin/env bash
# Runs every libFuzzer target of a -DBITNET_BUILD_FUZZERS=ON build for SECONDS each over its
# seeds (`make fuzz`, part of `make test`; docs/reliability.md). New inputs collect in
# BUILD/fuzz/<target>/corpus and carry over to the next run; a crash, sanitizer report or
# failed check stops with its reproducer in BUILD/fuzz/<target>/ and a non-zero exit.
#   tests/fuzz/run.sh BUILD SECONDS [SHARED] [TARGET...]
set -euo pipefail
build=$1 seconds=$2 shared=${3:-}
shift $(( $# < 3 ? $# : 3 ))
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$build" && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_gguf fuzz_model fuzz_tokenizer fuzz_chat_template fuzz_request fuzz_server)

# The GGUF targets start from every model the repo and ../shared hold, plus tests/fuzz/seeds.
models=$build/fuzz/model-seeds
mkdir -p "$models"
for f in "$root"/models/*.gguf ${shared:+"$shared"/models/*.gguf}; do
  [ -f "$f" ] && ln -sf "$f" "$models/"
done

for t in "${targets[@]}"; do
  seeds=() args=(-max_len=4096)
  case $t in
    fuzz_gguf) seeds=("$here/seeds" "$models") args=(-max_len=65536) ;;
    fuzz_model) seeds=("$here/seeds" "$models") args=(-max_len=2000000 -rss_limit_mb=4096) ;;
    fuzz_tokenizer) seeds=("$here/seeds_tokenizer") ;;
    fuzz_chat_template) seeds=("$root/src/chat/testdata") ;;
    fuzz_request) seeds=("$here/seeds_request") args+=(-dict="$here/dicts/openai.dict") ;;
    fuzz_server) seeds=("$here/seeds_http") args+=(-dict="$here/dicts/openai.dict") ;;
    *) echo "unknown fuzz target $t" >&2; exit 2 ;;
  esac
  work=$build/fuzz/$t
  mkdir -p "$work/corpus"
  echo "== $t: ${seconds}s"
  # libFuzzer writes crash-*/timeout-*/oom-* into the working directory.
  if ! (cd "$work" && "$build/bin/$t" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
          "${args[@]}" corpus "${seeds[@]}" > log.txt 2>&1); then
    tail -n 60 "$work/log.txt"
    echo "FAILED: $t (reproducer and log in $work)" >&2
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$work/log.txt" | tail -n 2
done
