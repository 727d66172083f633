#version 450
#extension GL_GOOGLE_include_directive : require
// W2A8 activations, one workgroup per row (act_quant.cpp): s = 127 / max(max|x|, 1e-5) rounded
// once (cr_div: IEEE division), q = clamp(roundEven(x * s), -128, 127). q is stored 4 per
// word (element 4m + j in byte j of word m, rows padded to whole words), s per row.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Src { float src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Q { uint q[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Scale { float act_scale[]; };
layout(push_constant) uniform Params {
  uint n_cols;
} p;

shared float partial[64];

int quantize(float x, float s) {
  precise float r = roundEven(x * s);
  if (r >= 127.0) return 127;
  if (r <= -128.0) return -128;
  if (r != r) return 0;
  return int(r);
}

void main() {
  uint row = gl_WorkGroupID.x;
  uint tid = gl_LocalInvocationID.x;
  uint base = row * p.n_cols;
  float amax = 0.0;
  for (uint i = tid; i < p.n_cols; i += 64u) {
    float a = abs(src[base + i]);
    if (a > amax) amax = a;  // false for NaN, as the reference
  }
  partial[tid] = amax;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (tid < s && partial[tid + s] > partial[tid]) partial[tid] = partial[tid + s];
    barrier();
  }
  amax = partial[0];
  // The reference floors max|x| at 1e-5 in double: a float above float(1e-5) is above it,
  // and the floor itself gives 127 / 1e-5 = 12700000 exactly.
  float s = amax > 1e-5 ? cr_div(127.0, amax) : 12700000.0;
  if (tid == 0u) act_scale[row] = s;
  uint n_words = (p.n_cols + 3u) / 4u;
  for (uint m = tid; m < n_words; m += 64u) {
    uint word = 0u;
    for (uint j = 0u; j < 4u; ++j) {
      uint i = 4u * m + j;
      int v = i < p.n_cols ? quantize(src[base + i], s) : 0;
      word |= (uint(v) & 0xffu) << (8u * j);
    }
    q[row * n_words + m] = word;
  }
}
