#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef INT_DOT
// The packed int8 dot product, OpSDot (SPV_KHR_integer_dot_product; see matmul_w2a8.comp).
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot_4x8_packed(uint a, uint b, spirv_literal int packed_format);
int dot4(uint a, uint b) { return sdot_4x8_packed(a, b, 0); }
#else
int dot4(uint a, uint b) {
  int s = 0;
  for (int j = 0; j < 32; j += 8) s += bitfieldExtract(int(a), j, 8) * bitfieldExtract(int(b), j, 8);
  return s;
}
#endif
// Block-format matmul against 8-bit activations (quantize_q8.comp), as the CPU backend and
// llama.cpp's MMVQ compute it (ggml_vec_dot_<type>_<q8 type>, quant/*.cpp):
//   y[t][row0 + r] = sum over blocks of (block scales) * (integer dot of the weight codes with
//   the activation int8s), the min terms from the activation block sums.
// Each weight block is unpacked into words of 4 signed bytes and dotted 4 lanes at a time
// (dot4: OpSDot in matmul_quant_dot.spv, plain integer multiplies in matmul_quant.spv); the
// integer sums are exact, and the float steps are the CPU scalar kernels' in their order
// (`precise`: no fused multiply-add), so the result equals the CPU backend bit for bit.
// 32-element formats: one int32 sum per block. K formats: per block, the CPU's 8 accumulator
// lanes (lane l = elements e with e % 8 == l): the activations of each 32 come lane-major
// (word l = elements l, l+8, l+16, l+24) and the weight codes are transposed to match.
// One invocation per (row, tile of TILE_T tokens); weights word-interleaved, file layout
// (weight_fetch.glsl), Q8_0 as int8 quads + float scales.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TYPE = 0u;
layout(std430, set = 0, binding = 0) readonly buffer WData { uint wdata[]; };
layout(std430, set = 0, binding = 1) readonly buffer WScale { float wscale[]; };
layout(std430, set = 0, binding = 2) readonly buffer Q { uint q[]; };
layout(std430, set = 0, binding = 3) readonly buffer Meta { uint meta[]; };
layout(std430, set = 0, binding = 4) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
  uint n_cols;
  uint n_rows;        // rows in this chunk
  uint row0;          // first output column of this chunk
  uint n_rows_total;  // row stride of y
  uint n_tokens;      // tokens of this dispatch: t_base ..
  uint t_base;        // first token (row of q) of this dispatch
  uint y_offset;      // element of the bound y window that holds token t_base, column 0
} p;
#include "weight_fetch.glsl"

const uint TILE_T = 4u;

// 16 bytes from (even) byte o of row r, little-endian, 4 per word.
uvec4 wbytes16(uint r, uint o, uint n_rows) {
  uint i = (o >> 2) * n_rows + r;
  uvec4 v = uvec4(wdata[i], wdata[i + n_rows], wdata[i + 2u * n_rows], wdata[i + 3u * n_rows]);
  if ((o & 3u) == 0u) return v;
  uint e = wdata[i + 4u * n_rows];
  return uvec4((v.x >> 16) | (v.y << 16), (v.y >> 16) | (v.z << 16), (v.z >> 16) | (v.w << 16), (v.w >> 16) | (e << 16));
}
// Bytes v - k for bytes v <= 127 and k <= 128 (k4: k in every byte), as signed bytes, without
// borrows between bytes.
uint sub_bytes(uint v, uint k4) { return ((v | 0x80808080u) - k4) ^ 0x80808080u; }
// The 4 low bits of h spread to bit 4 of bytes 0..3.
uint spread4(uint h) { return ((h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21)) << 4; }
// Byte transpose: word m of the result holds byte m of a, b, c, d in bytes 0..3.
void transpose4(uint a, uint b, uint c, uint d, out uint o0, out uint o1, out uint o2, out uint o3) {
  uint t0 = (a & 0x00ff00ffu) | ((b & 0x00ff00ffu) << 8);  // a0 b0 a2 b2
  uint t1 = ((a >> 8) & 0x00ff00ffu) | (b & 0xff00ff00u);  // a1 b1 a3 b3
  uint t2 = (c & 0x00ff00ffu) | ((d & 0x00ff00ffu) << 8);  // c0 d0 c2 d2
  uint t3 = ((c >> 8) & 0x00ff00ffu) | (d & 0xff00ff00u);  // c1 d1 c3 d3
  o0 = (t0 & 0xffffu) | (t2 << 16);
  o1 = (t1 & 0xffffu) | (t3 << 16);
  o2 = (t0 >> 16) | (t2 & 0xffff0000u);
  o3 = (t1 >> 16) | (t3 & 0xffff0000u);
}
// n[i] holds elements 4i..4i+3 of 32; lane-major: p[l] holds elements l, l+8, l+16, l+24.
void lane_major(uint n[8], out uint pl[8]) {
  transpose4(n[0], n[2], n[4], n[6], pl[0], pl[1], pl[2], pl[3]);
  transpose4(n[1], n[3], n[5], n[7], pl[4], pl[5], pl[6], pl[7]);
}

float meta_f(uint i) { return uintBitsToFloat(meta[i]); }

// ---- 32-element formats: one block -> 8 words of signed codes (elements 4i..4i+3 in word i),
// its fp16 d (Q8_0: the float scale) and, Q4_1/Q5_1, m.
void unpack32(uint r, uint b, out uint wq[8], out float dw, out float mw) {
  mw = 0.0;
  if (TYPE == kTypeQ8_0) {
    for (uint i = 0u; i < 8u; ++i) wq[i] = wdata[(8u * b + i) * p.n_rows + r];
    dw = wscale[b * p.n_rows + r];
    return;
  }
  bool q5 = TYPE == kTypeQ5_0 || TYPE == kTypeQ5_1;
  bool has_m = TYPE == kTypeQ4_1 || TYPE == kTypeQ5_1;
  uint bytes = TYPE == kTypeQ4_0 ? 18u : TYPE == kTypeQ4_1 ? 20u : TYPE == kTypeQ5_0 ? 22u : 24u;
  uint o = b * bytes;
  dw = whalf(r, o, p.n_rows);
  if (has_m) mw = whalf(r, o + 2u, p.n_rows);
  uint qh_at = has_m ? o + 4u : o + 2u;
  uvec4 qs = wbytes16(r, qh_at + (q5 ? 4u : 0u), p.n_rows);
  uint qh = q5 ? (wbytes16(r, qh_at, p.n_rows).x) : 0u;
  for (uint i = 0u; i < 4u; ++i) {
    uint lo = qs[i] & 0x0f0f0f0fu;          // elements 4i .. 4i+3
    uint hi = (qs[i] >> 4) & 0x0f0f0f0fu;   // elements 16+4i ..
    if (q5) {
      lo |= spread4(qh >> (4u * i));
      hi |= spread4(qh >> (16u + 4u * i));
    }
    if (TYPE == kTypeQ4_0) {
      lo = sub_bytes(lo, 0x08080808u);
      hi = sub_bytes(hi, 0x08080808u);
    } else if (TYPE == kTypeQ5_0) {
      lo = sub_bytes(lo, 0x10101010u);
      hi = sub_bytes(hi, 0x10101010u);
    }
    wq[i] = lo;
    wq[4u + i] = hi;
  }
}

void main32(uint r, uint t0, uint nt) {
  uint nb = p.n_cols / 32u;
  uint q_words = p.n_cols / 4u;
  precise float acc[TILE_T] = float[TILE_T](0.0, 0.0, 0.0, 0.0);
  for (uint b = 0u; b < nb; ++b) {
    uint wq[8];
    float dw, mw;
    unpack32(r, b, wq, dw, mw);
    for (uint t = 0u; t < nt; ++t) {
      uint tok = p.t_base + t0 + t;
      uint qa = tok * q_words + 8u * b;
      int s = 0;
      for (uint i = 0u; i < 8u; ++i) s += dot4(wq[i], q[qa + i]);
      uint mi = 2u * (tok * nb + b);
      float da = meta_f(mi);
      if (TYPE == kTypeQ4_0) {
        acc[t] += float(s) * dw * da;
      } else if (TYPE == kTypeQ4_1 || TYPE == kTypeQ5_1) {
        precise float d = dw * da;
        precise float ms = mw * meta_f(mi + 1u);
        acc[t] += d * float(s) + ms;
      } else {  // Q5_0, Q8_0: d * sumi with d = dw * da
        precise float d = dw * da;
        acc[t] += float(s) * d;
      }
    }
  }
  for (uint t = 0u; t < nt; ++t) y[p.y_offset + (t0 + t) * p.n_rows_total + p.row0 + r] = acc[t];
}

// ---- K formats: sub-block j (32 elements) of super-block at byte o -> lane-major signed codes.
void unpack_k(uint r, uint o, uint j, out uint pl[8]) {
  uint n[8];
  if (TYPE == kTypeQ4_K || TYPE == kTypeQ5_K) {
    bool q5 = TYPE == kTypeQ5_K;
    uint qs = o + (q5 ? 48u : 16u) + 32u * (j >> 1);
    uint shift = 4u * (j & 1u);
    for (uint i = 0u; i < 8u; ++i) {
      n[i] = (wdata[((qs >> 2) + i) * p.n_rows + r] >> shift) & 0x0f0f0f0fu;
      if (q5) n[i] |= ((wdata[(((o + 16u) >> 2) + i) * p.n_rows + r] >> j) & 0x01010101u) << 4;
    }
  } else {  // Q6_K: element 128h + 32kk + l: ql[64h + 32(kk & 1) + l] (nibble kk / 2), qh[32h + l] bits 2kk
    uint h = j >> 2, kk = j & 3u;
    uint ql = o + 64u * h + 32u * (kk & 1u);
    uint qh = o + 128u + 32u * h;
    for (uint half_ = 0u; half_ < 2u; ++half_) {
      uvec4 lo = wbytes16(r, ql + 16u * half_, p.n_rows);
      uvec4 hi = wbytes16(r, qh + 16u * half_, p.n_rows);
      for (uint i = 0u; i < 4u; ++i) {
        uint v = ((lo[i] >> (4u * (kk >> 1))) & 0x0f0f0f0fu) | (((hi[i] >> (2u * kk)) & 0x03030303u) << 4);
        n[4u * half_ + i] = sub_bytes(v, 0x20202020u);
      }
    }
  }
  lane_major(n, pl);
}

void main_k(uint r, uint t0, uint nt) {
  uint nb = p.n_cols / 256u;
  uint n32 = p.n_cols / 32u;
  uint q_words = p.n_cols / 4u;
  uint bytes = TYPE == kTypeQ4_K ? 144u : TYPE == kTypeQ5_K ? 176u : 210u;
  precise float sums[TILE_T][8];
  precise float sumf[TILE_T] = float[TILE_T](0.0, 0.0, 0.0, 0.0);
  for (uint t = 0u; t < TILE_T; ++t) {
    for (uint l = 0u; l < 8u; ++l) sums[t][l] = 0.0;
  }
  for (uint b = 0u; b < nb; ++b) {
    uint o = b * bytes;
    int lanes[TILE_T][8];
    int msum[TILE_T] = int[TILE_T](0, 0, 0, 0);
    for (uint t = 0u; t < TILE_T; ++t) {
      for (uint l = 0u; l < 8u; ++l) lanes[t][l] = 0;
    }
    for (uint j = 0u; j < 8u; ++j) {
      uint pl[8];
      unpack_k(r, o, j, pl);
      int sc_a, sc_b, mn;
      if (TYPE == kTypeQ6_K) {
        sc_a = bitfieldExtract(int(wbyte(r, o + 192u + 2u * j, p.n_rows)), 0, 8);       // elements l, l+8
        sc_b = bitfieldExtract(int(wbyte(r, o + 193u + 2u * j, p.n_rows)), 0, 8);       // l+16, l+24
        mn = 0;
      } else {
        uvec2 sm = wscale_min_k4(r, o + 4u, j, p.n_rows);
        sc_a = int(sm.x);
        sc_b = sc_a;
        mn = int(sm.y);
      }
      for (uint t = 0u; t < nt; ++t) {
        uint tok = p.t_base + t0 + t;
        uint qa = tok * q_words + 64u * b + 8u * j;  // 64 words per super-block
        for (uint l = 0u; l < 8u; ++l) {
          uint a = q[qa + l];
          if (TYPE == kTypeQ6_K) {
            lanes[t][l] += sc_a * dot4(pl[l] & 0x0000ffffu, a) + sc_b * dot4(pl[l] & 0xffff0000u, a);
          } else {
            lanes[t][l] += sc_a * dot4(pl[l], a);
          }
        }
        msum[t] += mn * int(meta[2u * (tok * n32 + 8u * b + j) + 1u]);
      }
    }
    float dw = whalf(r, o + (TYPE == kTypeQ6_K ? 208u : 0u), p.n_rows);
    float dminw = TYPE == kTypeQ6_K ? 0.0 : whalf(r, o + 2u, p.n_rows);
    for (uint t = 0u; t < nt; ++t) {
      uint tok = p.t_base + t0 + t;
      float da = meta_f(2u * (tok * n32 + 8u * b));
      precise float d = dw * da;
      for (uint l = 0u; l < 8u; ++l) sums[t][l] += d * float(lanes[t][l]);
      if (TYPE != kTypeQ6_K) {
        precise float dmin = dminw * da;
        sumf[t] -= dmin * float(msum[t]);
      }
    }
  }
  for (uint t = 0u; t < nt; ++t) {
    precise float s = sumf[t];
    for (uint l = 0u; l < 8u; ++l) s += sums[t][l];
    y[p.y_offset + (t0 + t) * p.n_rows_total + p.row0 + r] = s;
  }
}

void main() {
  uint r = gl_GlobalInvocationID.x;
  if (r >= p.n_rows) return;
  uint t0 = gl_WorkGroupID.y * TILE_T;
  uint nt = min(TILE_T, p.n_tokens - t0);
  if (TYPE == kTypeQ4_K || TYPE == kTypeQ5_K || TYPE == kTypeQ6_K) {
    main_k(r, t0, nt);
  } else {
    main32(r, t0, nt);
  }
}
