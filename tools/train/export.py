#!/usr/bin/env python3
"""Exports a trained checkpoint to GGUF and writes the PyTorch reference the engine is tested
against (tests/e2e/trained_model_test.cpp reads these files; no PyTorch is needed there).

    python3 tools/train/export.py --ckpt tools/train/work/ckpt.pt \
        --tokenizer-from ../shared/models/stories260K-v1.gguf \
        --heldout-jsonl tools/train/work/heldout.jsonl --bitnet build/bin/bitnet \
        --out models/tiny-stories-b158.gguf
    python3 tools/train/export.py --reference-only --out models/tiny-stories-b158.gguf \
        --bitnet build/bin/bitnet        # the reference files alone, from the committed GGUF

Writes, next to --out (basename B = tiny-stories-b158):
  B.gguf                       architecture bitnet-b1.58; the 28 linears I2_S (or --type),
                               token_embd F16 (= the tied head), norms F32, stories260K's tokenizer
  B.ref.json                   the reference: prompt ids, decode ids, n_vocab, held-out perplexity
  B.ref-logits.f32             float32 [n_prompt + n_decode][n_vocab]: the frozen PyTorch model's
                               logits (prompt positions, then one decode step per token)
  B.heldout.txt                held-out text (stories never seen in training) for perplexity

The reference is the frozen model (model.py) rebuilt from the written GGUF (load_gguf): the
ternary codes and fp16-exact scales, the F16 embedding and the F32 norms the engine reads, with
activations quantized exactly as the engine does.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "convert"))
import gguflib  # noqa: E402
import ternary  # noqa: E402
from model import BitNet, Config  # noqa: E402

ARCH = "bitnet-b1.58"
PACKERS = {"i2_s": (gguflib.I2_S, ternary.pack_i2s), "tq2_0": (gguflib.TQ2_0, ternary.pack_tq2_0),
           "tq1_0": (gguflib.TQ1_0, ternary.pack_tq1_0)}
PROMPT = "Once upon a time, there was a little girl named Lily. She loved to"
N_DECODE = 24


def load_frozen(ckpt_path):
    ck = torch.load(ckpt_path, map_location="cpu")
    model = BitNet(Config(**ck["config"]))
    model.load_state_dict(ck["state"])
    model.eval()
    model.freeze()
    return model, ck


def write_gguf(model, tok_reader, path, wtype, meta):
    c = model.c
    w = gguflib.Writer()
    w.add_string("general.architecture", ARCH)
    w.add_string("general.name", "tiny-stories-b158")
    w.add_u32("general.alignment", gguflib.ALIGNMENT)
    w.add_string("general.description", meta)
    p = ARCH + "."
    w.add_u32(p + "context_length", c.n_ctx)
    w.add_u32(p + "embedding_length", c.n_embd)
    w.add_u32(p + "block_count", c.n_layer)
    w.add_u32(p + "feed_forward_length", c.n_ff)
    w.add_u32(p + "attention.head_count", c.n_head)
    w.add_u32(p + "attention.head_count_kv", c.n_head_kv)
    w.add_u32(p + "rope.dimension_count", c.head_dim)
    w.add_f32(p + "rope.freq_base", c.rope_base)
    w.add_f32(p + "attention.layer_norm_rms_epsilon", c.rms_eps)
    w.add_string(p + "hidden_act", "relu2")
    gguflib.copy_tokenizer(tok_reader, w)

    def f32(name, t):
        a = t.detach().float().numpy()
        w.add_tensor(name, gguflib.F32, a.shape[::-1], a.astype("<f4").tobytes())

    emb = model.tok_embd.weight.detach().numpy().astype("<f2")
    w.add_tensor("token_embd.weight", gguflib.F16, emb.shape[::-1], emb.tobytes())
    f32("output_norm.weight", model.output_norm.weight)
    lin = dict(model.linears())
    for il, b in enumerate(model.blocks):
        f32(f"blk.{il}.attn_norm.weight", b.attn_norm.weight)
        f32(f"blk.{il}.attn_sub_norm.weight", b.attn_sub_norm.weight)
        f32(f"blk.{il}.ffn_norm.weight", b.ffn_norm.weight)
        f32(f"blk.{il}.ffn_sub_norm.weight", b.ffn_sub_norm.weight)
        for n in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
            name = f"blk.{il}.{n}.weight"
            t, scale = lin[name].frozen
            t = t.to(torch.int8).numpy()
            if wtype == "f16":
                data = (t.astype(np.float32) * np.float32(scale)).astype("<f2")
                w.add_tensor(name, gguflib.F16, t.shape[::-1], data.tobytes())
            else:
                gtype, pack = PACKERS[wtype]
                w.add_tensor(name, gtype, t.shape[::-1], pack(t, scale))
    w.write(path)


@torch.no_grad()
def reference_logits(model, prompt_ids, decode_ids):
    """Prompt in one step, then each decode token alone through the KV cache (the engine's two
    paths). Returns float32 [len(prompt) + len(decode)][n_vocab]."""
    cache = []
    rows = [model(torch.tensor([prompt_ids]), 0, cache)[0]]
    pos = len(prompt_ids)
    for t in decode_ids:
        rows.append(model(torch.tensor([[t]]), pos, cache)[0])
        pos += 1
    return torch.cat(rows).float().numpy()


@torch.no_grad()
def perplexity(model, ids, n_ctx):
    """llama-perplexity's method (src/engine/perplexity.cpp): ids = BOS + text; chunks of n_ctx,
    first token of each chunk replaced by BOS; with first = n_ctx / 2, the logits of positions
    first .. n_ctx - 2 score tokens first + 1 .. n_ctx - 1 (n_ctx / 2 - 1 tokens a chunk)."""
    n_chunks = len(ids) // n_ctx
    nll, n = 0.0, 0
    for k in range(n_chunks):
        chunk = list(ids[k * n_ctx:(k + 1) * n_ctx])
        chunk[0] = 1
        logits = model(torch.tensor([chunk]), 0, None)[0].double()
        lp = F.log_softmax(logits, dim=-1)
        for i in range(n_ctx // 2 + 1, n_ctx):
            nll -= float(lp[i - 1, chunk[i]])
            n += 1
    return math.exp(nll / n), n_chunks, n


def load_gguf(path):
    """The reference model straight from an exported file (I2_S or F16 linears, F16 embedding,
    F32 norms): what the engine runs, so the reference needs no checkpoint."""
    r = gguflib.Reader(path)
    p = ARCH + "."
    c = Config(n_vocab=len(r.value("tokenizer.ggml.tokens")), n_embd=r.value(p + "embedding_length"),
               n_layer=r.value(p + "block_count"), n_head=r.value(p + "attention.head_count"),
               n_head_kv=r.value(p + "attention.head_count_kv"), n_ff=r.value(p + "feed_forward_length"),
               n_ctx=r.value(p + "context_length"), rope_base=r.value(p + "rope.freq_base"),
               rms_eps=r.value(p + "attention.layer_norm_rms_epsilon"))
    model = BitNet(c)
    model.eval()
    with torch.no_grad():
        model.tok_embd.weight.copy_(torch.from_numpy(r.tensor_f32("token_embd.weight")))
        model.output_norm.weight.copy_(torch.from_numpy(r.tensor_f32("output_norm.weight")))
        for il, b in enumerate(model.blocks):
            for n in ("attn_norm", "attn_sub_norm", "ffn_norm", "ffn_sub_norm"):
                getattr(b, n).weight.copy_(torch.from_numpy(r.tensor_f32(f"blk.{il}.{n}.weight")))
    for name, m in model.linears():
        t, ne, _ = r.tensors[name]
        if t != gguflib.I2_S:
            raise ValueError(f"{name}: the reference reads I2_S files only")
        codes, scale = ternary.unpack_i2s(r.tensor_bytes(name), int(np.prod(ne)))
        m.freeze(torch.from_numpy(codes.reshape(ne[::-1]).astype(np.int8)), float(scale))
    return model


def write_reference(model, gguf_path, heldout_path, bitnet, ppl_ctx, seed):
    """B.ref.json + B.ref-logits.f32 next to the model, from the frozen model."""
    from prepare_data import tokenize as engine_tokenize

    base = gguf_path[:-len(".gguf")]
    with open(heldout_path, encoding="utf-8") as f:
        text = f.read()
    # The engine's perplexity tokenizes the file with BOS; ask the engine for those ids.
    ids = [1] + engine_tokenize(bitnet, gguf_path, text)
    ppl, n_chunks, _ = perplexity(model, ids, ppl_ctx)
    print(f"held-out: {len(ids)} tokens, PyTorch PPL = {ppl:.4f} ({n_chunks} chunks of {ppl_ctx})")

    prompt_ids = [1] + engine_tokenize(bitnet, gguf_path, PROMPT)
    # Decode tokens: the frozen model's own greedy continuation.
    with torch.no_grad():
        cache, dec = [], []
        logits = model(torch.tensor([prompt_ids]), 0, cache)[0, -1]
        for i in range(N_DECODE):
            t = int(torch.argmax(logits))
            dec.append(t)
            logits = model(torch.tensor([[t]]), len(prompt_ids) + i, cache)[0, -1]
    ref = reference_logits(model, prompt_ids, dec)
    ref.astype("<f4").tofile(base + ".ref-logits.f32")
    info = {
        "model": os.path.basename(gguf_path),
        "prompt": PROMPT,
        "prompt_ids": prompt_ids,
        "decode_ids": dec,
        "n_vocab": model.c.n_vocab,
        "heldout": os.path.basename(heldout_path),
        "ppl_ctx": ppl_ctx,
        "ppl_torch": ppl,
        "ppl_chunks": n_chunks,
        "seed": seed,
        "regenerate": "python3 tools/train/export.py --reference-only --out " + os.path.basename(gguf_path)
                      + " --bitnet build/bin/bitnet (tools/train/README.md)",
    }
    with open(base + ".ref.json", "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print(f"reference: {len(prompt_ids)} prompt + {len(dec)} decode positions -> {base}.ref-logits.f32")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", help="checkpoint of train.py (not needed with --reference-only)")
    ap.add_argument("--tokenizer-from", help="stories260K-v1.gguf (its tokenizer.* keys are copied)")
    ap.add_argument("--out", required=True, help="the .gguf to write (or to read with --reference-only)")
    ap.add_argument("--type", default="i2_s", choices=["i2_s", "tq2_0", "tq1_0", "f16"])
    ap.add_argument("--heldout-jsonl", help="held-out stories (gen_data.py): writes B.heldout.txt")
    ap.add_argument("--heldout-stories", type=int, default=12)
    ap.add_argument("--reference-only", action="store_true",
                    help="rewrite only B.ref.json / B.ref-logits.f32 from the existing .gguf and B.heldout.txt")
    ap.add_argument("--bitnet", help="engine CLI, to tokenize the reference prompt and held-out text")
    ap.add_argument("--ppl-ctx", type=int, default=128)
    a = ap.parse_args()
    torch.set_num_threads(2)
    base = a.out[:-len(".gguf")]
    seed = None
    if not a.reference_only:
        if not (a.ckpt and a.tokenizer_from):
            ap.error("--ckpt and --tokenizer-from are required unless --reference-only")
        model, ck = load_frozen(a.ckpt)
        seed = ck["seed"]
        meta = (f"BitNet b1.58 trained by tools/train (seed {ck['seed']}, {ck['steps']} steps of "
                f"{ck['batch']}x{model.c.n_ctx} tokens) on stories written by stories260K")
        write_gguf(model, gguflib.Reader(a.tokenizer_from), a.out, a.type, meta)
        print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes, {a.type})")
        if a.heldout_jsonl:
            with open(a.heldout_jsonl, encoding="utf-8") as f:
                stories = [json.loads(line)["text"] for line in f]
            with open(base + ".heldout.txt", "w", encoding="utf-8") as f:
                f.write("".join(stories[:a.heldout_stories]))
    if a.type != "i2_s" or not a.bitnet or not os.path.exists(base + ".heldout.txt"):
        return
    if seed is None and os.path.exists(base + ".ref.json"):
        with open(base + ".ref.json") as f:
            seed = json.load(f).get("seed")
    # The reference is rebuilt from the file itself: exactly the weights the engine reads.
    write_reference(load_gguf(a.out), a.out, base + ".heldout.txt", a.bitnet, a.ppl_ctx, seed)


if __name__ == "__main__":
    main()
