#version 450
#extension GL_GOOGLE_include_directive : require
// Activations of the integer-dot block-format matmul (matmul_quant.comp), quantized once per
// matmul exactly as the CPU backend's activation blocks (ggml's reference quantizers,
// quant/q8_0.cpp and quant/q8_k.cpp), so that the matmul can repeat the CPU's arithmetic:
//   MODE 0, Q8_0 (for Q4_0, Q5_0, Q8_0): per 32 elements d = max|x| / 127, q = round(x / d)
//     (halves away from zero); d kept as its fp16 value.
//   MODE 1, Q8_1 (for Q4_1, Q5_1): the same plus s = fp16(d * sum q).
//   MODE 0 also for IQ4_NL.
//   MODE 2, Q8_K (for Q2_K .. Q6_K, IQ4_XS): per 256 elements d = 1 / (-127 / x_max) with
//     x_max the first element of largest magnitude (with its sign), q = min(127,
//     roundEven(x * -127 / x_max)); the CPU's 16-element bsums.
// Output, per token row of n_cols: q as n_cols / 4 words of 4 int8 (MODE 0/1: element 4m + j
// in byte j of word m; MODE 2: within each 32 elements, word l holds elements l, l+8, l+16,
// l+24, the CPU's 8 accumulator lanes, in bytes 0..3), and per 32 elements two words of meta:
// float d, then (MODE 1) float s or (MODE 2) the two 16-element sums of q as int16 in the low and
// high half (MODE 0: 0).
// One invocation per block (32 or 256 elements).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MODE = 0u;
layout(std430, set = 0, binding = 0) readonly buffer Src { float src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Q { uint q[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Meta { uint meta[]; };
layout(push_constant) uniform Params {
  uint n_blocks;  // blocks of all rows (rows are whole blocks, so block b starts at element 32b / 256b)
} p;

// x rounded to the nearest fp16 value (ties to even) and widened: core/fp16.h's fp32_to_fp16
// then fp16_to_fp32, in integers (a conversion instruction's rounding is not specified).
float round_to_half(float x) {
  uint sign = floatBitsToUint(x) & 0x80000000u;
  float a = abs(x);
  if (a != a) return x;
  if (a >= 65520.0) return uintBitsToFloat(sign | 0x7f800000u);
  if (a < 6.103515625e-05) {  // 2^-14: a subnormal fp16, multiples of 2^-24
    precise float r = roundEven(a * 16777216.0) * 5.9604644775390625e-08;
    return uintBitsToFloat(sign | floatBitsToUint(r));
  }
  uint m = floatBitsToUint(a);
  m = (m + 0xfffu + ((m >> 13) & 1u)) & ~0x1fffu;
  return uintBitsToFloat(sign | m);
}

// round(v), halves away from zero (std::round); a non-finite v gives 0 (as ggml on x86).
int round_away(float v) {
  if (isinf(v) || isnan(v)) return 0;
  float t = trunc(v);
  if (abs(v - t) >= 0.5) t += sign(v);
  return int(t);
}

void quantize32(uint blk) {
  uint base = blk * 32u;
  float amax = 0.0;
  for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(src[base + j]));
  float d = amax == 0.0 ? 0.0 : cr_div(amax, 127.0);
  float id = d != 0.0 ? cr_div(1.0, d) : 0.0;
  int sum = 0;
  for (uint i = 0u; i < 8u; ++i) {
    uint word = 0u;
    for (uint j = 0u; j < 4u; ++j) {
      precise float v = src[base + 4u * i + j] * id;
      int qv = round_away(v);
      sum += qv;
      word |= (uint(qv) & 0xffu) << (8u * j);
    }
    q[blk * 8u + i] = word;
  }
  meta[2u * blk] = floatBitsToUint(round_to_half(d));
  precise float s = float(sum) * d;
  meta[2u * blk + 1u] = MODE == 1u ? floatBitsToUint(round_to_half(s)) : 0u;
}

void quantize256(uint blk) {
  uint base = blk * 256u;
  float amax = 0.0, xmax = 0.0;
  for (uint j = 0u; j < 256u; ++j) {
    float x = src[base + j];
    if (abs(x) > amax) {
      amax = abs(x);
      xmax = x;
    }
  }
  float iscale = amax == 0.0 ? 0.0 : cr_div(-127.0, xmax);
  float d = amax == 0.0 ? 0.0 : cr_div(1.0, iscale);
  for (uint s = 0u; s < 8u; ++s) {
    int sum[2] = int[2](0, 0);  // elements 0..15 (bytes 0, 1 of the words), 16..31 (bytes 2, 3)
    for (uint l = 0u; l < 8u; ++l) {
      uint word = 0u;
      for (uint m = 0u; m < 4u; ++m) {
        precise float v = iscale * src[base + 32u * s + l + 8u * m];
        int qv = min(127, int(roundEven(v)));
        sum[m >> 1] += qv;
        word |= (uint(qv) & 0xffu) << (8u * m);
      }
      q[blk * 64u + 8u * s + l] = word;
    }
    meta[2u * (8u * blk + s)] = floatBitsToUint(d);
    meta[2u * (8u * blk + s) + 1u] = (uint(sum[0]) & 0xffffu) | (uint(sum[1]) << 16);
  }
}

void main() {
  uint blk = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (blk >= p.n_blocks) return;
  if (MODE == 2u) {
    quantize256(blk);
  } else {
    quantize32(blk);
  }
}
