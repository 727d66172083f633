#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef INT_DOT
// Debian's glslang has no GL_EXT_integer_dot_product: the SPIR-V instruction itself (OpSDot,
// SPV_KHR_integer_dot_product; capabilities DotProduct and DotProductInput4x8BitPacked) with
// the packed 4x8-bit operand format (0).
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot_4x8_packed(uint a, uint b, spirv_literal int packed_format);
#endif
// Ternary W2A8 matmul over one row chunk of the weight:
//   y[t][row0 + r] = sum_b float(sum_{k in b} (code - 1) * q[t][k]) / s[t] * scale[r][b]
// One invocation per (row, tile of TILE_T tokens), blocks in order: each block's sum is an exact
// int32, the float steps are the CPU reference's (IEEE division via cr_div, no fused
// multiply-add: `precise`), so results are bit-identical to it.
// Weights: n_cols / 16 words per row in the I2_S 128-group layout (word j of a group holds
// elements 4j..4j+3 (+32n) in bits 7-6 (n=0) .. 1-0 (n=3) of its bytes), word-interleaved:
// word i of row r at w[i * n_rows + r] (neighbouring rows, neighbouring words); scales of
// (r, b) at wscale[b * n_rows + r]. Activations: 4 int8 per word, one scale per token.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 1) readonly buffer WScale { float wscale[]; };
layout(std430, set = 0, binding = 2) readonly buffer Q { uint q[]; };
layout(std430, set = 0, binding = 3) readonly buffer QScale { float qscale[]; };
layout(std430, set = 0, binding = 4) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
  uint n_cols;        // multiple of 128
  uint n_rows;        // rows in this chunk
  uint row0;          // first output column of this chunk
  uint n_rows_total;  // row stride of y
  uint n_tokens;      // tokens of this dispatch: t_base ..
  uint scale_block;   // elements per scale (multiple of 128)
  uint t_base;        // first token (row of q) of this dispatch
  uint y_offset;      // element of the bound y window that holds token t_base, column 0
} p;

const uint TILE_T = 4u;

// sum over the 4 lanes of (code - 1) * q for codes c4 (one per byte) and the int8 quad a.
#ifdef INT_DOT
// The packed int8 dot product (matmul_w2a8_dot.spv, for devices with shaderIntegerDotProduct):
// code - 1 as a signed byte without borrows between bytes, ((c | 0x80) - 1) ^ 0x80, then one
// signed packed dot. The same exact int32 sum as the loop below.
int dot4(uint c4, uint a) {
  return sdot_4x8_packed(((c4 | 0x80808080u) - 0x01010101u) ^ 0x80808080u, a, 0);
}
#else
int dot4(uint c4, uint a) {
  int s = 0;
  for (uint j = 0u; j < 4u; ++j) {
    int c = int((c4 >> (8u * j)) & 3u) - 1;
    s += c * bitfieldExtract(int(a), int(8u * j), 8);
  }
  return s;
}
#endif

void main() {
  uint r = gl_GlobalInvocationID.x;
  if (r >= p.n_rows) return;
  uint t0 = gl_WorkGroupID.y * TILE_T;
  uint nt = min(TILE_T, p.n_tokens - t0);
  uint words_per_block = p.scale_block / 16u;
  uint n_blocks = p.n_cols / p.scale_block;
  uint q_words = p.n_cols / 4u;
  precise float acc[TILE_T] = float[TILE_T](0.0, 0.0, 0.0, 0.0);
  for (uint b = 0u; b < n_blocks; ++b) {
    int sum[TILE_T] = int[TILE_T](0, 0, 0, 0);
    for (uint wi = b * words_per_block; wi < (b + 1u) * words_per_block; ++wi) {
      uint ww = w[wi * p.n_rows + r];
      uint qbase = (wi / 8u) * 32u + (wi % 8u);  // word of element 4 * (wi % 8) of its group
      for (uint t = 0u; t < nt; ++t) {
        uint qrow = (p.t_base + t0 + t) * q_words + qbase;
        for (uint n = 0u; n < 4u; ++n) sum[t] += dot4((ww >> (6u - 2u * n)) & 0x03030303u, q[qrow + 8u * n]);
      }
    }
    float scale = wscale[b * p.n_rows + r];
    for (uint t = 0u; t < nt; ++t) acc[t] += cr_div(float(sum[t]), qscale[p.t_base + t0 + t]) * scale;
  }
  for (uint t = 0u; t < nt; ++t) y[p.y_offset + (t0 + t) * p.n_rows_total + p.row0 + r] = acc[t];
}
