"""BitNet b1.58 in PyTorch: the training model (quantization-aware) and the engine's reference.

The architecture is the engine's `bitnet-b1.58` (src/model/arch/bitnet.cpp, FORMATS.md):
    h   = x + Wo(attn_sub_norm(Attn(rope(Wq n), rope(Wk n), Wv n))),   n = attn_norm(x)
    out = h + Wdown(ffn_sub_norm(relu(Wgate m)^2 * (Wup m))),          m = ffn_norm(h)
    logits = output_norm(out) @ token_embd^T                           (tied head, float)
with NEOX rope (rotate the halves (x[i], x[i + d/2]) by pos * base^(-2i/d)), GQA, RMSNorm
without bias, and every linear of a layer ternary with per-token int8 activations:
    weights      t = clamp(round(W / mean|W|), -1, 1), w = t * mean|W|     (absmean, per tensor)
    activations  s = 127 / max(max|x|, 1e-5), q = clamp(round(x * s), -128, 127), x ~ q / s
Training uses the straight-through estimator (the forward sees the quantized values, the
backward the identity), so the exported ternary model computes what was trained.

`BitLinear.freeze()` replaces the master weight by its exported ternary codes and scale; a frozen
model is the reference the engine is compared against: it computes each linear the engine's way,
y = (sum_k t[r,k] q[k]) / s * scale, with s = (float)(127.0 / max(double max|x|, 1e-5)) and
q = round_half_even(x * s) in float32 (src/quant/act_quant.h), the integer dot exact in float64.
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    n_vocab: int = 512
    n_embd: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 768
    n_ctx: int = 256
    rope_base: float = 10000.0
    rms_eps: float = 1e-5

    @property
    def head_dim(self):
        return self.n_embd // self.n_head

    def to_dict(self):
        return asdict(self)


def act_quant_ste(x):
    """Fake per-token int8 quantization with a straight-through gradient."""
    s = 127.0 / x.detach().abs().amax(dim=-1, keepdim=True).clamp(min=1e-5)
    xq = (x * s).round().clamp(-128, 127) / s
    return x + (xq - x).detach()


def weight_quant_ste(w):
    """Fake absmean ternary quantization with a straight-through gradient."""
    scale = w.detach().abs().mean().clamp(min=1e-5)
    wq = (w / scale).round().clamp(-1, 1) * scale
    return w + (wq - w).detach()


def ternarize(w):
    """The exported form of a master weight: (t int8 in {-1,0,1}, float32 scale), scale rounded
    to fp16 so that I2_S (f32 scale) and TQ1_0/TQ2_0 (fp16 scales) hold the same weights."""
    scale = w.detach().abs().mean().clamp(min=1e-5)
    t = (w.detach() / scale).round().clamp(-1, 1).to(torch.int8)
    return t, float(torch.tensor(float(scale)).half().float())


def engine_act_quant(x):
    """src/quant/act_quant.h on a [..., n] float32 tensor: (q as float64, s as float32)."""
    amax = x.abs().amax(dim=-1, keepdim=True).double().clamp(min=1e-5)
    s = (127.0 / amax).float()
    q = torch.round(x * s).clamp(-128, 127)
    return q.double(), s


class BitLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in))  # [n_out][n_in], GGUF ne = {n_in, n_out}
        nn.init.normal_(self.weight, std=0.02)
        self.frozen = None  # (t float64 [n_out][n_in], scale) after freeze()

    def freeze(self, t=None, scale=None):
        if t is None:
            t, scale = ternarize(self.weight)
        self.frozen = (t.double(), float(scale))

    def forward(self, x):
        if self.frozen is None:
            return F.linear(act_quant_ste(x), weight_quant_ste(self.weight))
        t, scale = self.frozen
        q, s = engine_act_quant(x)
        return ((q @ t.T).float() / s) * scale


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        ms = x.double().pow(2).mean(dim=-1, keepdim=True).float()  # sum of squares in double
        return x * torch.rsqrt(ms + self.eps) * self.weight


def rope_neox(x, pos, base):
    """x [B][H][T][d]: rotate (x[i], x[i + d/2]) by pos * base^(-2i/d) (llama.cpp NEOX)."""
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2.0 / d)
    ang = pos.double()[:, None] * inv[None, :]                    # [T][d/2]
    cos, sin = ang.cos().float(), ang.sin().float()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        d_kv = c.n_head_kv * c.head_dim
        self.attn_norm = RMSNorm(c.n_embd, c.rms_eps)
        self.wq = BitLinear(c.n_embd, c.n_embd)
        self.wk = BitLinear(c.n_embd, d_kv)
        self.wv = BitLinear(c.n_embd, d_kv)
        self.attn_sub_norm = RMSNorm(c.n_embd, c.rms_eps)
        self.wo = BitLinear(c.n_embd, c.n_embd)
        self.ffn_norm = RMSNorm(c.n_embd, c.rms_eps)
        self.ffn_gate = BitLinear(c.n_embd, c.n_ff)
        self.ffn_up = BitLinear(c.n_embd, c.n_ff)
        self.ffn_sub_norm = RMSNorm(c.n_ff, c.rms_eps)
        self.ffn_down = BitLinear(c.n_ff, c.n_embd)

    def forward(self, x, pos, kv=None):
        """x [B][T][n_embd]; pos [T] absolute positions; kv: optional (k, v) of earlier positions,
        [B][n_head_kv][T0][head_dim] each. Returns (x, (k, v) including this step)."""
        c = self.c
        B, T, _ = x.shape
        n = self.attn_norm(x)
        q = self.wq(n).view(B, T, c.n_head, c.head_dim).transpose(1, 2)
        k = self.wk(n).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        v = self.wv(n).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        q, k = rope_neox(q, pos, c.rope_base), rope_neox(k, pos, c.rope_base)
        if kv is not None:
            k, v = torch.cat([kv[0], k], dim=2), torch.cat([kv[1], v], dim=2)
        rep = c.n_head // c.n_head_kv  # query head h reads KV head h // rep, as llama.cpp
        kk, vv = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ kk.transpose(-1, -2)) / math.sqrt(c.head_dim)     # [B][H][T][T0+T]
        t0 = kk.shape[2] - T
        mask = torch.ones(T, t0 + T, dtype=torch.bool).tril(diagonal=t0)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        a = (att @ vv).transpose(1, 2).reshape(B, T, c.n_embd)
        x = x + self.wo(self.attn_sub_norm(a))
        m = self.ffn_norm(x)
        g = self.ffn_gate(m)
        h = F.relu(g).square() * self.ffn_up(m)
        x = x + self.ffn_down(self.ffn_sub_norm(h))
        return x, (k, v)


class BitNet(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.tok_embd = nn.Embedding(c.n_vocab, c.n_embd)
        nn.init.normal_(self.tok_embd.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.output_norm = RMSNorm(c.n_embd, c.rms_eps)

    def forward(self, ids, pos0=0, cache=None):
        """ids [B][T] -> logits [B][T][n_vocab]. cache: list of per-layer (k, v) or None; when a
        list is given it is updated in place (the decode path)."""
        T = ids.shape[1]
        pos = torch.arange(pos0, pos0 + T)
        x = self.tok_embd(ids)
        for il, blk in enumerate(self.blocks):
            kv = cache[il] if cache is not None and il < len(cache) else None
            x, new_kv = blk(x, pos, kv)
            if cache is not None:
                if il < len(cache):
                    cache[il] = new_kv
                else:
                    cache.append(new_kv)
        return self.output_norm(x) @ self.tok_embd.weight.T

    def linears(self):
        """(GGUF name, BitLinear) for every ternary linear, in file order."""
        names = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
        for il, b in enumerate(self.blocks):
            mods = (b.wq, b.wk, b.wv, b.wo, b.ffn_gate, b.ffn_up, b.ffn_down)
            for n, m in zip(names, mods):
                yield f"blk.{il}.{n}.weight", m

    def freeze(self):
        """Turns the model into the reference for its exported file: ternary linears computed the
        engine's way, and the embedding (= tied head) rounded to fp16 as the file stores it."""
        with torch.no_grad():
            self.tok_embd.weight.copy_(self.tok_embd.weight.half().float())
        for _, m in self.linears():
            m.freeze()
