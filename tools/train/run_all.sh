#!/bin/sh
# The whole pipeline of models/tiny-stories-b158.gguf, from the engine and stories260K to the
# committed files (tools/train/README.md). About 35-50 minutes on 2 CPU cores.
#   sh tools/train/run_all.sh [BITNET_CLI] [STORIES260K_GGUF]
set -eu
BITNET=${1:-build/bin/bitnet}
STORIES=${2:-../shared/models/stories260K-v1.gguf}
PY=${PYTHON:-/usr/bin/python3}
W=tools/train/work
OUT=models/tiny-stories-b158.gguf
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}
mkdir -p "$W"
# 1. Corpus: 8500 training stories and 300 held-out ones (disjoint seed ranges), ~4 minutes.
$PY tools/train/gen_data.py --bitnet "$BITNET" --model "$STORIES" --out $W/heldout.jsonl --seed 9000000 --count 300
$PY tools/train/gen_data.py --bitnet "$BITNET" --model "$STORIES" --out $W/train.jsonl --seed 1000000 --count 8500
# 2. Token ids from the engine's own tokenizer.
$PY tools/train/prepare_data.py --bitnet "$BITNET" --model "$STORIES" --jsonl $W/train.jsonl --out $W/train
# 3. Quantization-aware training (seed 1234), ~27 minutes on 2 idle cores.
$PY tools/train/train.py --data $W/train --out $W/ckpt.pt --seed 1234 --steps 1200 --batch 16 --lr 4e-3 \
    --warmup 30 --threads 2 --n-embd 128 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 512 --n-ctx 256
# 4. Export (I2_S) + PyTorch reference (logits, held-out perplexity) + the engine's greedy text.
$PY tools/train/export.py --ckpt $W/ckpt.pt --tokenizer-from "$STORIES" --out $OUT \
    --heldout-jsonl $W/heldout.jsonl --bitnet "$BITNET"
"$BITNET" run -m $OUT -p "Once upon a time" -n 100 --temp 0 -t 1 > models/tiny-stories-b158.greedy.txt
