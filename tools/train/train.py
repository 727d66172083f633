#!/usr/bin/env python3
"""Quantization-aware training of the tiny BitNet b1.58 story model (see README.md).

Everything is a function of --seed: the weight init (torch.manual_seed) and the batch order
(numpy Generator). Each row of a batch starts at a story's BOS and runs n_ctx + 1 tokens
through the token stream (into the next story when one is shorter).

    python3 tools/train/train.py --data tools/train/work/train --out tools/train/work/ckpt.pt
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import BitNet, Config  # noqa: E402


def batches(stream, starts, n_ctx, batch, rng):
    starts = starts[starts + n_ctx + 1 <= len(stream)]
    while True:
        s = rng.choice(starts, size=batch)
        rows = np.stack([stream[i:i + n_ctx + 1] for i in s]).astype(np.int64)
        yield torch.from_numpy(rows)


def lr_at(step, n_steps, lr, warmup):
    if step < warmup:
        return lr * (step + 1) / warmup
    p = (step - warmup) / max(1, n_steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))  # cosine down to 10 %


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="prefix written by prepare_data.py")
    ap.add_argument("--out", required=True, help="checkpoint path (.pt)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-head-kv", type=int, default=2)
    ap.add_argument("--n-ff", type=int, default=512)
    ap.add_argument("--n-ctx", type=int, default=256)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    c = Config(n_embd=a.n_embd, n_layer=a.n_layer, n_head=a.n_head, n_head_kv=a.n_head_kv,
               n_ff=a.n_ff, n_ctx=a.n_ctx)
    model = BitNet(c)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"config {c.to_dict()} | {n_params} parameters", flush=True)

    stream = np.load(a.data + ".npy")
    starts = np.load(a.data + ".starts.npy")
    data = batches(stream, starts, c.n_ctx, a.batch, rng)
    # No weight decay on norms and the embedding (the usual split).
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "tok_embd" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "tok_embd" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95))
    t0 = time.time()
    avg = None
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.steps, a.lr, a.warmup)
        rows = next(data)
        logits = model(rows[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, c.n_vocab), rows[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        avg = loss.item() if avg is None else 0.95 * avg + 0.05 * loss.item()
        if step % 25 == 0 or step == a.steps - 1:
            el = time.time() - t0
            print(f"step {step:5d} loss {loss.item():.4f} (avg {avg:.4f}) lr {opt.param_groups[0]['lr']:.2e} "
                  f"{el:.0f}s {(step + 1) * a.batch * c.n_ctx / el:.0f} tok/s", flush=True)
    torch.save({"config": c.to_dict(), "state": model.state_dict(), "seed": a.seed, "steps": a.steps,
                "batch": a.batch, "lr": a.lr, "train_seconds": time.time() - t0,
                "n_tokens": a.steps * a.batch * c.n_ctx}, a.out)
    print(f"saved {a.out} after {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
