#!/usr/bin/env python3
"""Tokenizes the corpus of gen_data.py with the engine's own tokenizer (stories260K's 512-token
SentencePiece vocabulary), so that training sees exactly the ids the engine will produce.

Writes <out>.npy: a uint16 stream of stories, each [BOS, ids..., EOS] (EOS only for stories that
ended with end-of-generation), and <out>.starts.npy: the offset of each story's BOS.

Stories are tokenized 40 at a time as one text "story§ story§ story...": no vocabulary piece holds
'§', so it becomes its two byte tokens <0xC2><0xA7> and never merges with its neighbours, and the
space after it turns into the '▁' that SentencePiece's dummy prefix gives a story tokenized on its
own. --check N tokenizes the first N stories one by one as well and asserts the ids are equal.

    python3 tools/train/prepare_data.py --bitnet build/bin/bitnet \
        --model ../shared/models/stories260K-v1.gguf --jsonl tools/train/work/train.jsonl \
        --out tools/train/work/train
"""
import argparse
import json
import subprocess

import numpy as np

BOS, EOS = 1, 2
SEP = "\u00a7"                      # '§', UTF-8 C2 A7
SEP_IDS = (3 + 0xC2, 3 + 0xA7)      # byte tokens <0xC2>, <0xA7> (ids 3..258 are <0x00>..<0xFF>)
PER_CALL = 40


def tokenize(bitnet, model, text):
    r = subprocess.run([bitnet, "tokenize", "-m", model, "-p", text, "--ids", "--no-bos", "-t", "1"],
                       capture_output=True, check=True)
    out = r.stdout.decode().strip()
    return [int(x) for x in out.split(",")] if out else []


def tokenize_many(bitnet, model, texts):
    ids = tokenize(bitnet, model, (SEP + " ").join(texts))
    parts, cur, i = [], [], 0
    while i < len(ids):
        if tuple(ids[i:i + 2]) == SEP_IDS:
            parts.append(cur)
            cur = []
            i += 2
        else:
            cur.append(ids[i])
            i += 1
    parts.append(cur)
    if len(parts) != len(texts):
        raise RuntimeError(f"separator split gave {len(parts)} parts for {len(texts)} stories")
    return parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bitnet", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--jsonl", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", type=int, default=20)
    a = ap.parse_args()
    stories = [json.loads(line) for line in open(a.jsonl, encoding="utf-8")]
    for s in stories:
        if SEP in s["text"]:
            raise RuntimeError(f"story {s['seed']} contains the separator")
    stream, starts = [], []
    for k in range(0, len(stories), PER_CALL):
        batch = stories[k:k + PER_CALL]
        for s, ids in zip(batch, tokenize_many(a.bitnet, a.model, [s["text"] for s in batch])):
            if k < a.check and ids != tokenize(a.bitnet, a.model, s["text"]):
                raise RuntimeError(f"story {s['seed']}: batched tokenization differs")
            starts.append(len(stream))
            stream += [BOS] + ids + ([EOS] if s["stop"] == "eog" else [])
    np.save(a.out + ".npy", np.array(stream, dtype=np.uint16))
    np.save(a.out + ".starts.npy", np.array(starts, dtype=np.int64))
    print(f"{len(stories)} stories, {len(stream)} tokens -> {a.out}.npy")


if __name__ == "__main__":
    main()
