#!/usr/bin/env python3
"""Hugging Face BitNet b1.58 checkpoints -> GGUF (python3 + numpy only).

    python3 tools/convert/hf_to_gguf.py CHECKPOINT_DIR -o model.gguf [--type i2_s|tq2_0|tq1_0|f16]

Input layouts (CHECKPOINT_DIR holds config.json, *.safetensors, tokenizer.json and
tokenizer_config.json):
  packed   microsoft/bitnet-b1.58-2B-4T: BitNetForCausalLM; every linear of a layer is U8
           [rows/4][cols] (transformers' packing, 4 codes a byte along dim 0) with a {1}-shaped
           `<linear>.weight_scale` (BF16) that is the DIVISOR: W = t / weight_scale.
  master   microsoft/bitnet-b1.58-2B-4T-bf16: the same names, BF16 master weights, no scales;
           ternarized here with BitNet's absmean (t = clamp(round(W / mean|W|), -1, 1)).
  llama    LlamaForCausalLM with quantization_config.quant_method "bitnet" (Falcon3-1.58bit
           style): packed as above, no sub-norms, SiLU, NORM rope (q/k rows permuted as
           llama.cpp's converter does), separate lm_head.
Output: the linears in --type (default I2_S); the embedding and a separate head in F16; norms F32.
Scale convention: GGUF stores the MULTIPLIER (w = t * scale, scale = mean|W|; see ternary.py),
so the packed layout's weight_scale is inverted once on the way in.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguflib  # noqa: E402
import safetensors_io  # noqa: E402
import ternary  # noqa: E402

OUT_TYPES = {"i2_s": (gguflib.I2_S, ternary.pack_i2s), "tq2_0": (gguflib.TQ2_0, ternary.pack_tq2_0),
             "tq1_0": (gguflib.TQ1_0, ternary.pack_tq1_0), "f16": (gguflib.F16, None)}
LINEARS = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
           "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
           "mlp.down_proj": "ffn_down"}
NORMS = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
         "self_attn.attn_sub_norm": "attn_sub_norm", "mlp.ffn_sub_norm": "ffn_sub_norm"}


class ConvertError(Exception):
    pass


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_tensors(d):
    files = sorted(glob.glob(os.path.join(d, "*.safetensors")))
    if not files:
        raise ConvertError(f"{d}: no *.safetensors file")
    out = {}
    for f in files:
        out.update(safetensors_io.read(f))
    return out


def detect_layout(cfg, tensors):
    arch = (cfg.get("architectures") or [""])[0]
    packed = tensors.get("model.layers.0.self_attn.q_proj.weight")
    if packed is None:
        raise ConvertError("model.layers.0.self_attn.q_proj.weight is missing")
    is_packed = packed.dtype == np.uint8
    if arch == "BitNetForCausalLM":
        return "packed" if is_packed else "master"
    if arch == "LlamaForCausalLM":
        qc = cfg.get("quantization_config") or {}
        if qc.get("quant_method") != "bitnet" or not is_packed:
            raise ConvertError("LlamaForCausalLM is converted only as a packed 1.58-bit checkpoint "
                               "(quantization_config.quant_method = bitnet, U8 weights)")
        return "llama"
    raise ConvertError(f"architecture {arch!r} is not supported "
                       "(BitNetForCausalLM, LlamaForCausalLM with quant_method bitnet)")


def permute_rows(t, n_head):
    """llama.cpp convert_hf_to_gguf's permute: HF's rotate-half q/k rows -> the interleaved pairs
    that the NORM rope of arch llama rotates. Per head, row 2i <- i and row 2i+1 <- i + d/2."""
    rows = t.shape[0]
    return t.reshape(n_head, 2, rows // n_head // 2, *t.shape[1:]).swapaxes(1, 2).reshape(t.shape)


def ternary_weight(tensors, name, layout):
    w = tensors[name + ".weight"]
    if layout == "master":
        return ternary.absmean_ternarize(w.astype(np.float32))
    scale_name = name + ".weight_scale"
    if scale_name not in tensors:
        raise ConvertError(f"{scale_name} is missing")
    return ternary.from_hf_packed(w, tensors[scale_name])


def add_float(w, name, a, gtype):
    a = np.asarray(a, dtype=np.float32)
    dt = "<f2" if gtype == gguflib.F16 else "<f4"
    w.add_tensor(name, gtype, a.shape[::-1], a.astype(dt).tobytes())


def add_tokenizer(w, d):
    """tokenizer.json (byte-level BPE, as Llama 3 / Falcon3) + tokenizer_config.json -> the
    tokenizer.ggml.* keys the engine reads (gpt2 model, merges, token types, special ids, template)."""
    tj = read_json(os.path.join(d, "tokenizer.json"))
    tcfg_path = os.path.join(d, "tokenizer_config.json")
    tcfg = read_json(tcfg_path) if os.path.exists(tcfg_path) else {}
    model = tj.get("model", {})
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        raise ConvertError("only byte-level BPE tokenizer.json files are supported")
    vocab = dict(model["vocab"])
    special = {}
    for t in tj.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
        special[t["id"]] = bool(t.get("special"))
    n = max(vocab.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [5] * n  # unused
    for s, i in vocab.items():
        tokens[i] = s
        types[i] = 1  # normal
    for i, sp in special.items():
        types[i] = 3 if sp else 4  # control / user-defined
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", tcfg.get("gguf_pre", "llama-bpe"))
    w.add_array("tokenizer.ggml.tokens", gguflib.STRING, tokens)
    w.add_array("tokenizer.ggml.token_type", gguflib.INT32, types)
    w.add_array("tokenizer.ggml.merges", gguflib.STRING, merges)

    def token_id(key):
        v = tcfg.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        return vocab.get(v) if v is not None else None

    for key, gkey in (("bos_token", "bos"), ("eos_token", "eos"), ("pad_token", "padding")):
        i = token_id(key)
        if i is not None:
            w.add_u32(f"tokenizer.ggml.{gkey}_token_id", i)
    if "<|eot_id|>" in vocab:
        w.add_u32("tokenizer.ggml.eot_token_id", vocab["<|eot_id|>"])
    if "add_bos_token" in tcfg:
        w.add("tokenizer.ggml.add_bos_token", gguflib.BOOL, bool(tcfg["add_bos_token"]))
    if tcfg.get("chat_template"):
        w.add_string("tokenizer.chat_template", tcfg["chat_template"])


def convert(d, out_path, out_type="i2_s", name=None):
    cfg = read_json(os.path.join(d, "config.json"))
    tensors = load_tensors(d)
    layout = detect_layout(cfg, tensors)
    arch = "llama" if layout == "llama" else "bitnet-b1.58"
    n_embd, n_head = cfg["hidden_size"], cfg["num_attention_heads"]
    n_head_kv = cfg.get("num_key_value_heads", n_head)
    n_layer = cfg["num_hidden_layers"]
    head_dim = cfg.get("head_dim") or n_embd // n_head
    if head_dim * n_head != n_embd:
        raise ConvertError(f"head_dim {head_dim} x {n_head} heads != hidden_size {n_embd}")
    act = cfg.get("hidden_act", "relu2" if arch != "llama" else "silu")

    w = gguflib.Writer()
    w.add_string("general.architecture", arch)
    w.add_string("general.name", name or os.path.basename(os.path.normpath(d)))
    w.add_u32("general.alignment", gguflib.ALIGNMENT)
    p = arch + "."
    w.add_u32(p + "context_length", cfg.get("max_position_embeddings", 2048))
    w.add_u32(p + "embedding_length", n_embd)
    w.add_u32(p + "block_count", n_layer)
    w.add_u32(p + "feed_forward_length", cfg["intermediate_size"])
    w.add_u32(p + "attention.head_count", n_head)
    w.add_u32(p + "attention.head_count_kv", n_head_kv)
    w.add_u32(p + "rope.dimension_count", head_dim)
    w.add_f32(p + "rope.freq_base", cfg.get("rope_theta", 10000.0))
    w.add_f32(p + "attention.layer_norm_rms_epsilon", cfg.get("rms_norm_eps", 1e-5))
    w.add_string(p + "hidden_act", act)
    add_tokenizer(w, d)

    gtype, pack = OUT_TYPES[out_type]
    embd = tensors["model.embed_tokens.weight"]
    add_float(w, "token_embd.weight", embd, gguflib.F16)
    add_float(w, "output_norm.weight", tensors["model.norm.weight"], gguflib.F32)
    if "lm_head.weight" in tensors and not cfg.get("tie_word_embeddings", False):
        add_float(w, "output.weight", tensors["lm_head.weight"], gguflib.F16)
    for il in range(n_layer):
        hf = f"model.layers.{il}."
        for hname, gname in NORMS.items():
            if hf + hname + ".weight" in tensors:
                add_float(w, f"blk.{il}.{gname}.weight", tensors[hf + hname + ".weight"], gguflib.F32)
            elif arch != "llama":
                raise ConvertError(f"{hf}{hname}.weight is missing")
        for hname, gname in LINEARS.items():
            t, scale = ternary_weight(tensors, hf + hname, layout)
            if layout == "llama" and gname in ("attn_q", "attn_k"):
                t = permute_rows(t, n_head if gname == "attn_q" else n_head_kv)
            name = f"blk.{il}.{gname}.weight"
            if pack is None:
                add_float(w, name, t.astype(np.float32) * scale, gguflib.F16)
            else:
                w.add_tensor(name, gtype, t.shape[::-1], pack(t, scale))
    w.write(out_path)
    return layout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", help="Hugging Face checkpoint directory")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--type", default="i2_s", choices=sorted(OUT_TYPES))
    ap.add_argument("--name")
    a = ap.parse_args()
    try:
        layout = convert(a.checkpoint, a.out, a.type, a.name)
    except (ConvertError, ValueError, KeyError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{a.checkpoint} ({layout} layout) -> {a.out} ({a.type})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
