"""Ternary weights: BitNet b1.58's absmean quantizer and the GGUF packers (I2_S, TQ2_0, TQ1_0).

A ternary tensor here is (t, scale): t an int8 array in {-1, 0, +1} of shape [rows][cols] (cols =
GGUF ne[0], the contiguous dimension) and one float32 scale, w = t * scale.

Scale convention (the ambiguity noted in ../shared/docs/FORMATS.md): the scale stored in a GGUF
file is the MULTIPLIER, w = t * scale, with scale = mean|W| of the master weights (BitNet
b1.58's absmean). Hugging Face checkpoints store the opposite: transformers' BitLinear computes
y = (x_q . t) / (x_scale * weight_scale), so their `weight_scale` is the DIVISOR 1/mean|W|.
hf_to_gguf.py inverts it once (from_hf_packed); everything below takes the multiplier.
"""
import numpy as np


def absmean_ternarize(w):
    """BitNet b1.58 weight quantizer (as transformers' / bitnet.cpp's converter weight_quant):
    s = 1 / max(mean|W|, 1e-5); t = clamp(round(W * s), -1, 1); returns (t, 1 / s).
    np.round rounds half to even as torch.round does."""
    w = np.asarray(w, dtype=np.float32)
    s = np.float32(1.0) / np.maximum(np.abs(w).mean(dtype=np.float32), np.float32(1e-5))
    t = np.clip(np.round(w * s), -1, 1).astype(np.int8)
    return t, np.float32(1.0) / s


def fp16_exact(scale):
    """The scale rounded to the nearest fp16 value. TQ2_0/TQ1_0 store fp16 block scales and I2_S
    an f32 one: exporting the fp16-exact value makes the three files decode to the same weights."""
    return np.float32(np.float16(scale))


def _codes(t, block):
    """t [rows][cols] (or 1-D) -> flat codes w + 1; blocks never straddle rows: cols % block == 0."""
    t = np.asarray(t)
    if t.shape[-1] % block:
        raise ValueError(f"row length {t.shape[-1]} is not a multiple of the {block}-element block")
    if t.min(initial=0) < -1 or t.max(initial=0) > 1:
        raise ValueError("not ternary")
    return (t.astype(np.int16) + 1).astype(np.uint8).reshape(-1)


def pack_i2s(t, scale):
    """I2_S (type 36): 128-element groups of 32 bytes, element 32n + m of a group in byte m,
    bits 7-2n..6-2n (high bits first); then the f32 scale and 28 zero bytes."""
    c = _codes(t, 128)
    g = c.reshape(-1, 4, 32).astype(np.uint8)
    packed = (g[:, 0] << 6) | (g[:, 1] << 4) | (g[:, 2] << 2) | g[:, 3]
    return packed.tobytes() + np.float32(scale).tobytes() + bytes(28)


def pack_tq2_0(t, scale):
    """TQ2_0 (type 35): 256-element blocks of qs[64] + fp16 d. Byte qs[32h + m] bits 2n..2n+1
    hold element 128h + m + 32n (low bits first). d = scale in every block."""
    c = _codes(t, 256)
    g = c.reshape(-1, 2, 4, 32)
    qs = (g[:, :, 0] | (g[:, :, 1] << 2) | (g[:, :, 2] << 4) | (g[:, :, 3] << 6)).reshape(-1, 64)
    d = np.full((qs.shape[0], 1), np.float16(scale), dtype="<f2").view(np.uint8)
    return np.concatenate([qs.astype(np.uint8), d], axis=1).tobytes()


def _pack_trits(c, n_trits):
    """c[..., n_trits] codes 0..2 -> bytes ceil(sum c_n 3^(4-n) * 256 / 243) (first trit most
    significant; fewer than 5 trits are shifted up to the top), ggml's quantize_row_tq1_0_ref."""
    q = np.zeros(c.shape[:-1], dtype=np.int32)
    for n in range(n_trits):
        q = q * 3 + c[..., n]
    q = q * 3 ** (5 - n_trits)
    return ((q * 256 + 242) // 243).astype(np.uint8)


def pack_tq1_0(t, scale):
    """TQ1_0 (type 34): 256-element blocks of qs[48] + qh[4] + fp16 d. Elements 0-159: element
    m + 32n in qs[m] (n = 0..4); 160-239: element 160 + m + 16n in qs[32 + m]; 240-255: element
    240 + m + 4n in qh[m] (n = 0..3). d = scale in every block."""
    c = _codes(t, 256).astype(np.int32)
    b = c.reshape(-1, 256)
    qs0 = _pack_trits(b[:, :160].reshape(-1, 5, 32).transpose(0, 2, 1), 5)      # [nb][32]
    qs1 = _pack_trits(b[:, 160:240].reshape(-1, 5, 16).transpose(0, 2, 1), 5)   # [nb][16]
    qh = _pack_trits(b[:, 240:].reshape(-1, 4, 4).transpose(0, 2, 1), 4)        # [nb][4]
    d = np.full((b.shape[0], 1), np.float16(scale), dtype="<f2").view(np.uint8)
    return np.concatenate([qs0, qs1, qh, d], axis=1).tobytes()


def unpack_i2s(data, n):
    """Inverse of pack_i2s: (t int8[n], scale)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    g = raw[:n // 4].reshape(-1, 32)
    c = np.stack([(g >> 6) & 3, (g >> 4) & 3, (g >> 2) & 3, g & 3], axis=1).reshape(-1)
    scale = np.frombuffer(data[n // 4:n // 4 + 4], dtype="<f4")[0]
    return c.astype(np.int8) - 1, np.float32(scale)


def from_hf_packed(packed, weight_scale):
    """transformers' BitNet packing -> (t, scale). packed: uint8 [rows/4][cols]; bit pair i
    (bits 2i..2i+1) of packed row r holds weight row i * rows/4 + r as w + 1.
    weight_scale: the checkpoint's divisor (W = t / weight_scale); returns the multiplier."""
    packed = np.asarray(packed, dtype=np.uint8)
    fields = np.concatenate([(packed >> (2 * i)) & 3 for i in range(4)], axis=0)
    if fields.max(initial=0) > 2:
        raise ValueError("a 2-bit field holds 3: not transformers' BitNet packing")
    ws = float(np.asarray(weight_scale, dtype=np.float32).reshape(-1)[0])
    if not ws > 0:
        raise ValueError(f"weight_scale {ws} is not positive")
    return fields.astype(np.int8) - 1, np.float32(1.0 / ws)


def to_hf_packed(t):
    """Inverse of from_hf_packed's unpacking (used by the tests to write published layouts)."""
    c = (np.asarray(t).astype(np.int16) + 1).astype(np.uint8)
    rows = c.shape[0]
    if rows % 4:
        raise ValueError("rows must be a multiple of 4")
    q = rows // 4
    return c[:q] | (c[q:2 * q] << 2) | (c[2 * q:3 * q] << 4) | (c[3 * q:] << 6)
