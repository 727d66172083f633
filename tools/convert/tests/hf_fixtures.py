"""Small Hugging Face checkpoints in the published layouts, and a numpy reference of what
transformers computes with them (the converter's tests compare the engine's logits with it).

Layouts (see hf_to_gguf.py): "packed" (bitnet-b1.58-2B-4T: U8 weights + BF16 weight_scale
divisors), "master" (-bf16: BF16 master weights), "llama" (Falcon3-1.58bit: LlamaForCausalLM,
packed, SiLU, no sub-norms, separate lm_head).
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import safetensors_io  # noqa: E402
import ternary  # noqa: E402

N_EMBD, N_HEAD, N_HEAD_KV, N_FF, N_LAYER = 256, 4, 2, 512, 2
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] }}"
                 "<|eot_id|>{% endfor %}Assistant: ")
MERGES = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a"]


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (byte-level BPE)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def vocab():
    v = {}
    for ch in bytes_to_unicode().values():
        v[ch] = len(v)
    for m in MERGES:
        v[m.replace(" ", "")] = len(v)
    return v


def n_vocab():
    return len(vocab()) + len(SPECIAL)


def write_tokenizer(d):
    v = vocab()
    added = [{"id": len(v) + i, "content": s, "special": True} for i, s in enumerate(SPECIAL)]
    tj = {"version": "1.0", "added_tokens": added,
          "pre_tokenizer": {"type": "ByteLevel"},
          "model": {"type": "BPE", "byte_fallback": False, "vocab": v, "merges": MERGES}}
    write_json(os.path.join(d, "tokenizer.json"), tj)
    write_json(os.path.join(d, "tokenizer_config.json"),
               {"bos_token": SPECIAL[0], "eos_token": SPECIAL[1], "add_bos_token": True,
                "chat_template": CHAT_TEMPLATE})


def random_model(layout, seed):
    """Master parameters: {hf name: float32 array} for linears' ternary codes and scales."""
    rng = np.random.default_rng(seed)
    V = n_vocab()
    d_kv = N_EMBD // N_HEAD * N_HEAD_KV
    shapes = {"self_attn.q_proj": (N_EMBD, N_EMBD), "self_attn.k_proj": (d_kv, N_EMBD),
              "self_attn.v_proj": (d_kv, N_EMBD), "self_attn.o_proj": (N_EMBD, N_EMBD),
              "mlp.gate_proj": (N_FF, N_EMBD), "mlp.up_proj": (N_FF, N_EMBD),
              "mlp.down_proj": (N_EMBD, N_FF)}
    p = {"model.embed_tokens.weight": rng.normal(0, 1, (V, N_EMBD)).astype(np.float32),
         "model.norm.weight": rng.uniform(0.5, 1.5, N_EMBD).astype(np.float32)}
    if layout == "llama":
        p["lm_head.weight"] = rng.normal(0, 0.1, (V, N_EMBD)).astype(np.float32)
    for il in range(N_LAYER):
        hf = f"model.layers.{il}."
        p[hf + "input_layernorm.weight"] = rng.uniform(0.5, 1.5, N_EMBD).astype(np.float32)
        p[hf + "post_attention_layernorm.weight"] = rng.uniform(0.5, 1.5, N_EMBD).astype(np.float32)
        if layout != "llama":
            p[hf + "self_attn.attn_sub_norm.weight"] = rng.uniform(0.5, 1.5, N_EMBD).astype(np.float32)
            p[hf + "mlp.ffn_sub_norm.weight"] = rng.uniform(0.5, 1.5, N_FF).astype(np.float32)
        for name, shape in shapes.items():
            if layout == "master":
                p[hf + name + ".weight"] = rng.normal(0, 0.02, shape).astype(np.float32)
            else:
                p[hf + name + ".weight"] = rng.integers(-1, 2, shape).astype(np.float32)
                # A power of two: its inverse (the GGUF multiplier) is exact in f32 and fp16, so
                # I2_S, TQ2_0 and TQ1_0 hold bit-identical weights.
                p[hf + name + ".weight_scale"] = np.array([2.0 ** rng.integers(2, 6)], np.float32)
    # Embedding and head as the file stores them (bf16 in the checkpoint, F16 in the GGUF).
    for k in ("model.embed_tokens.weight", "lm_head.weight"):
        if k in p:
            p[k] = safetensors_io.bf16_to_f32(safetensors_io.f32_to_bf16(p[k]))
    return p


def write_checkpoint(d, layout, seed=7):
    """Writes config.json, model.safetensors and the tokenizer in `layout`; returns the params
    as the checkpoint holds them (BF16 values as float32)."""
    os.makedirs(d, exist_ok=True)
    p = random_model(layout, seed)
    llama = layout == "llama"
    cfg = {"architectures": ["LlamaForCausalLM" if llama else "BitNetForCausalLM"],
           "model_type": "llama" if llama else "bitnet",
           "hidden_size": N_EMBD, "intermediate_size": N_FF, "num_hidden_layers": N_LAYER,
           "num_attention_heads": N_HEAD, "num_key_value_heads": N_HEAD_KV,
           "hidden_act": "silu" if llama else "relu2", "max_position_embeddings": 128,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0 if llama else 500000.0,
           "tie_word_embeddings": not llama, "vocab_size": n_vocab(), "torch_dtype": "bfloat16"}
    if layout != "master":
        cfg["quantization_config"] = {"quant_method": "bitnet", "linear_class": "autobitlinear",
                                      "quantization_mode": "offline"}
    write_json(os.path.join(d, "config.json"), cfg)
    out, dtypes = {}, {}
    for k, a in p.items():
        if k.endswith(".weight_scale"):
            out[k] = a
            dtypes[k] = "BF16"
        elif layout != "master" and k.endswith("_proj.weight"):
            out[k] = ternary.to_hf_packed(a.astype(np.int8))
        else:
            out[k] = a
            dtypes[k] = "BF16"
    safetensors_io.write(os.path.join(d, "model.safetensors"), out, dtypes)
    write_tokenizer(d)
    return {k: (safetensors_io.bf16_to_f32(safetensors_io.f32_to_bf16(v)) if dtypes.get(k) == "BF16" else v)
            for k, v in p.items()}, cfg


# ---- numpy reference of transformers' forward ------------------------------------------------

def _rms(x, g, eps):
    return x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps).astype(np.float32) * g


def _act_quant(x):
    s = 127.0 / np.maximum(np.abs(x).max(-1, keepdims=True), 1e-5)
    return np.clip(np.round(x * s), -128, 127), s


def _bitlinear(x, w):
    """transformers' BitLinear: y = (q . t) / (s * weight_scale) with w = (t, multiplier)."""
    t, scale = w
    q, s = _act_quant(x)
    return (q.astype(np.float64) @ t.T.astype(np.float64)) / s * scale


def _rotate_half_rope(x, pos, base):
    d = x.shape[-1]
    inv = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.concatenate([np.cos(ang)] * 2, -1), np.concatenate([np.sin(ang)] * 2, -1)
    rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * cos + rot * sin


def reference_logits(p, cfg, ids, layout):
    """float64 logits [len(ids)][n_vocab] of the checkpoint as transformers runs it."""
    def lin(name):
        if layout == "master":  # transformers' online weight_quant (absmean), written out again
            w = p[name + ".weight"]
            s = np.float32(1) / np.maximum(np.abs(w).mean(dtype=np.float32), np.float32(1e-5))
            return np.clip(np.round(w * s), -1, 1).astype(np.int8), np.float32(1) / s
        return p[name + ".weight"].astype(np.int8), np.float32(1.0 / p[name + ".weight_scale"][0])

    eps = cfg["rms_norm_eps"]
    T = len(ids)
    hd = N_EMBD // N_HEAD
    pos = np.arange(T, dtype=np.float64)
    x = p["model.embed_tokens.weight"][ids].astype(np.float64)
    for il in range(N_LAYER):
        hf = f"model.layers.{il}."
        n = _rms(x, p[hf + "input_layernorm.weight"], eps)
        q = _bitlinear(n, lin(hf + "self_attn.q_proj")).reshape(T, N_HEAD, hd).transpose(1, 0, 2)
        k = _bitlinear(n, lin(hf + "self_attn.k_proj")).reshape(T, N_HEAD_KV, hd).transpose(1, 0, 2)
        v = _bitlinear(n, lin(hf + "self_attn.v_proj")).reshape(T, N_HEAD_KV, hd).transpose(1, 0, 2)
        q, k = _rotate_half_rope(q, pos, cfg["rope_theta"]), _rotate_half_rope(k, pos, cfg["rope_theta"])
        rep = N_HEAD // N_HEAD_KV
        k, v = np.repeat(k, rep, 0), np.repeat(v, rep, 0)
        att = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
        att = np.where(np.tril(np.ones((T, T), bool)), att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        a = (att @ v).transpose(1, 0, 2).reshape(T, N_EMBD)
        if layout != "llama":
            a = _rms(a, p[hf + "self_attn.attn_sub_norm.weight"], eps)
        x = x + _bitlinear(a, lin(hf + "self_attn.o_proj"))
        m = _rms(x, p[hf + "post_attention_layernorm.weight"], eps)
        g = _bitlinear(m, lin(hf + "mlp.gate_proj"))
        u = _bitlinear(m, lin(hf + "mlp.up_proj"))
        h = (g / (1 + np.exp(-g))) * u if layout == "llama" else np.maximum(g, 0) ** 2 * u
        if layout != "llama":
            h = _rms(h, p[hf + "mlp.ffn_sub_norm.weight"], eps)
        x = x + _bitlinear(h, lin(hf + "mlp.down_proj"))
    x = _rms(x, p["model.norm.weight"], eps)
    head = p["lm_head.weight"] if layout == "llama" else p["model.embed_tokens.weight"]
    head = head.astype(np.float16).astype(np.float64)  # the GGUF stores the head in F16
    return x @ head.T
