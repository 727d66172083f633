#version 450
#extension GL_GOOGLE_include_directive : require
// Float-path matmul over one row chunk of an F32/F16/BF16/Q8_0 weight (the head, F32 models)
// or of a llama.cpp block format (Q4_0 .. IQ4_XS, dequantized 8 elements at a time):
//   y[t][row0 + r] = sum_k w[r][k] * x[t][k]
// One invocation per (row, tile of TILE_T tokens): weights are word-interleaved, so a
// subgroup's loads of one k are contiguous; each weight element is converted once and used for
// every token of the tile. Each dot product keeps the CPU reference's order (8 partial sums
// over k mod 8, combined pairwise), which makes the result bit-identical to it.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TYPE = 0u;
layout(std430, set = 0, binding = 0) readonly buffer WData { uint wdata[]; };
layout(std430, set = 0, binding = 1) readonly buffer WScale { float wscale[]; };
layout(std430, set = 0, binding = 2) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
  uint n_cols;
  uint n_rows;        // rows in this chunk
  uint row0;          // first output column of this chunk
  uint n_rows_total;  // row stride of y
  uint n_tokens;      // tokens of this dispatch: t_base ..
  uint t_base;        // first token (row of x) of this dispatch
  uint y_offset;      // element of the bound y window that holds token t_base, column 0
} p;
#include "weight_fetch.glsl"

const uint TILE_T = 4u;

void main() {
  uint r = gl_GlobalInvocationID.x;
  if (r >= p.n_rows) return;
  uint t0 = gl_WorkGroupID.y * TILE_T;
  uint nt = min(TILE_T, p.n_tokens - t0);
  precise float acc[TILE_T][8];
  for (uint t = 0u; t < TILE_T; ++t) {
    for (uint l = 0u; l < 8u; ++l) acc[t][l] = 0.0;
  }
  uint k = 0u;
  for (; k + 8u <= p.n_cols; k += 8u) {
    float w8[8];
    weight8_at(r, k, p.n_rows, w8);
    for (uint l = 0u; l < 8u; ++l) {
      for (uint t = 0u; t < nt; ++t) acc[t][l] += w8[l] * x[(p.t_base + t0 + t) * p.n_cols + k + l];
    }
  }
  for (uint t = 0u; t < nt; ++t) {
    precise float sum = ((acc[t][0] + acc[t][1]) + (acc[t][2] + acc[t][3])) +
                        ((acc[t][4] + acc[t][5]) + (acc[t][6] + acc[t][7]));
    for (uint kk = k; kk < p.n_cols; ++kk) sum += weight_at(r, kk, p.n_rows) * x[(p.t_base + t0 + t) * p.n_cols + kk];
    y[p.y_offset + (t0 + t) * p.n_rows_total + p.row0 + r] = sum;
  }
}
