#!/bin/bash
# Run by check.sh's ab step on the GPU machine: two bitnet binaries (the previous bundle's and
# this one's) on the same model, alternating twice: pp128 + tg64 with the file's head, then tg64
# with the head requantized to Q6_K. Prints each run's table rows under "== base|new, round N".
#   tools/gpu/ab.sh BASE_BITNET NEW_BITNET MODEL
set -u
[ $# -eq 3 ] || { echo "usage: $0 BASE_BITNET NEW_BITNET MODEL" >&2; exit 2; }
base=$1 new=$2 model=$3
rows() { grep -E '^\| [^-]' | grep -v '^| model'; }
for round in 1 2; do
  for which in base new; do
    exe=$new
    [ "$which" = base ] && exe=$base
    echo "== $which, round $round"
    "$exe" bench -m "$model" --device cuda -p 128 -n 64 -r 3 | rows
    "$exe" bench -m "$model" --device cuda --head-type q6_K -p 0 -n 64 -r 3 | rows
  done
done
