#!/usr/bin/env python3
"""Writes the training corpus: stories sampled from stories260K by the engine itself.

Story k is `bitnet run -m stories260K-v1.gguf -n 400 --temp T --seed S -t 1` with S = seed + k
and T cycling over 0.8, 0.9, 1.0 (the CLI's default top-k 40, top-p 0.95, min-p 0.05), so the
corpus is a pure function of (engine, model, seed, count). One JSON object per line:
{"seed": S, "temp": T, "stop": "eog"|"length", "text": "..."}.

    python3 tools/train/gen_data.py --bitnet build/bin/bitnet \
        --model ../shared/models/stories260K-v1.gguf --out tools/train/work/train.jsonl \
        --seed 1000000 --count 8500
"""
import argparse
import json
import re
import subprocess
import sys

TEMPS = (0.8, 0.9, 1.0)


def story(bitnet, model, seed, temp, n_predict):
    r = subprocess.run([bitnet, "run", "-m", model, "-n", str(n_predict), "--temp", str(temp),
                        "--seed", str(seed), "-t", "1"], capture_output=True, check=True)
    m = re.search(r"stop: (\w+)", r.stderr.decode())
    if m is None:
        raise RuntimeError(f"no summary line from bitnet run (seed {seed})")
    return r.stdout.decode("utf-8", errors="replace"), m.group(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bitnet", required=True, help="the engine's CLI binary")
    ap.add_argument("--model", required=True, help="stories260K-v1.gguf")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, required=True, help="seed of the first story")
    ap.add_argument("--count", type=int, required=True, help="number of stories")
    ap.add_argument("--n-predict", type=int, default=400)
    a = ap.parse_args()
    n_chars = 0
    with open(a.out, "w", encoding="utf-8") as f:
        for k in range(a.count):
            seed = a.seed + k
            temp = TEMPS[k % len(TEMPS)]
            text, stop = story(a.bitnet, a.model, seed, temp, a.n_predict)
            f.write(json.dumps({"seed": seed, "temp": temp, "stop": stop, "text": text}) + "\n")
            n_chars += len(text)
            if (k + 1) % 1000 == 0:
                print(f"{k + 1}/{a.count} stories, {n_chars} chars", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
