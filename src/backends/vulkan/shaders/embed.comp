#version 450
#extension GL_GOOGLE_include_directive : require
// dst[t] = row tokens[t] of the weight, for the tokens whose row lies in this chunk
// [row0, row0 + n_rows). One workgroup per token; threads stride the row (coalesced).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TYPE = 0u;
layout(std430, set = 0, binding = 0) readonly buffer WData { uint wdata[]; };
layout(std430, set = 0, binding = 1) readonly buffer WScale { float wscale[]; };
layout(std430, set = 0, binding = 2) readonly buffer Tokens { int tokens[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params {
  uint n_cols;
  uint row0;
  uint n_rows;
} p;
#include "weight_fetch.glsl"

void main() {
  uint t = gl_WorkGroupID.x;
  int id = tokens[t];
  if (id < int(p.row0) || id >= int(p.row0 + p.n_rows)) return;
  uint r = uint(id) - p.row0;
  for (uint k = gl_LocalInvocationID.x; k < p.n_cols; k += gl_WorkGroupSize.x) {
    dst[t * p.n_cols + k] = weight_at(r, k, p.n_rows);
  }
}
