#version 450
#extension GL_GOOGLE_include_directive : require
// dst = a / sqrt(mean(a^2) + eps) * g, one workgroup per row (in place allowed: every read
// of the row happens before the barrier that precedes the writes). USE_F64: the sum of
// squares in double, as the CPU reference (and ggml) does; else float.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Src { float src[]; };
layout(std430, set = 0, binding = 1) readonly buffer Gain { float gain[]; };
layout(std430, set = 0, binding = 2) buffer Dst { float dst[]; };
layout(push_constant) uniform Params {
  uint n_cols;
  float eps;
} p;

#if USE_F64
#define ACC double
#else
#define ACC float
#endif
shared ACC partial[64];

void main() {
  uint row = gl_WorkGroupID.x;
  uint tid = gl_LocalInvocationID.x;
  uint base = row * p.n_cols;
  precise ACC sum = ACC(0);
  for (uint i = tid; i < p.n_cols; i += 64u) {
    ACC x = ACC(src[base + i]);
    sum += x * x;
  }
  partial[tid] = sum;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (tid < s) partial[tid] = partial[tid] + partial[tid + s];
    barrier();
  }
  precise float mean = float(partial[0] / ACC(p.n_cols));
  precise float scale = cr_div(1.0, sqrt(mean + p.eps));
  for (uint i = tid; i < p.n_cols; i += 64u) {
    precise float y = src[base + i] * scale * gain[i];
    dst[base + i] = y;
  }
}
