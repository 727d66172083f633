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
// IQ4_NL table values of 4 codes (low nibble of each byte) as 4 signed bytes.
uint iq4_bytes(uint nib) {
  uint v = 0u;
  for (uint m = 0u; m < 4u; ++m) v |= (uint(kIq4NlValues[(nib >> (8u * m)) & 15u]) & 0xffu) << (8u * m);
  return v;
}

// ---- 32-element formats: one block -> 8 words of signed codes (elements 4i..4i+3 in word i),
// its fp16 d (Q8_0: the float scale) and, Q4_1/Q5_1, m.
void unpack32(uint r, uint b, out uint wq[8], out float dw, out float mw) {
  mw = 0.0;
  if (TYPE == kTypeQ8_0) {
    for (uint i = 0u; i < 8u; ++i) wq[i] = wdata[(8u * b + i) * p.n_rows + r];
    dw = wscale[b * p.n_rows + r];
    return;
  }
  if (TYPE == kTypeIQ4_NL) {  // 18 bytes: d, qs[16] (element j: low nibble of qs[j], j + 16: high)
    dw = whalf(r, 18u * b, p.n_rows);
    uvec4 qs = wbytes16(r, 18u * b + 2u, p.n_rows);
    for (uint i = 0u; i < 4u; ++i) {
      wq[i] = iq4_bytes(qs[i] & 0x0f0f0f0fu);
      wq[4u + i] = iq4_bytes((qs[i] >> 4) & 0x0f0f0f0fu);
    }
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
      } else {  // Q5_0, Q8_0, IQ4_NL: d * sumi with d = dw * da
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
  } else if (TYPE == kTypeQ2_K || TYPE == kTypeQ3_K) {
    // 2-bit codes of element e = 128h + 32k + l: bits 2k of qs[32h + l] (Q2_K qs at 16, Q3_K at
    // 32); Q3_K: code - 4 where bit e / 32 of hmask[l] is clear.
    bool q3 = TYPE == kTypeQ3_K;
    uint qs = o + (q3 ? 32u : 16u) + 32u * (j >> 2);
    uint shift = 2u * (j & 3u);
    for (uint half_ = 0u; half_ < 2u; ++half_) {
      uvec4 lo = wbytes16(r, qs + 16u * half_, p.n_rows);
      uvec4 hm = q3 ? wbytes16(r, o + 16u * half_, p.n_rows) : uvec4(0u);
      for (uint i = 0u; i < 4u; ++i) {
        uint v = (lo[i] >> shift) & 0x03030303u;
        if (q3) v = sub_bytes(v | (((hm[i] >> j) & 0x01010101u) << 2), 0x04040404u);
        n[4u * half_ + i] = v;
      }
    }
  } else if (TYPE == kTypeIQ4_XS) {  // sub-block j: qs[16j .. 16j+15] at 8, as an IQ4_NL block
    uvec4 qs = wbytes16(r, o + 8u + 16u * j, p.n_rows);
    for (uint i = 0u; i < 4u; ++i) {
      n[i] = iq4_bytes(qs[i] & 0x0f0f0f0fu);
      n[4u + i] = iq4_bytes((qs[i] >> 4) & 0x0f0f0f0fu);
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

// Q3_K's signed 6-bit scale of 16-element group g, from the 12 scale bytes at o + 96.
int q3_scale(uint r, uint o, uint g) {
  uint lo = g < 8u ? (wbyte(r, o + 96u + g, p.n_rows) & 15u) : (wbyte(r, o + 88u + g, p.n_rows) >> 4);
  uint sc = lo | (((wbyte(r, o + 104u + (g & 3u), p.n_rows) >> (2u * (g >> 2))) & 3u) << 4);
  return int(sc) - 32;
}

// The K formats, each as its CPU scalar dot (quant/q4_k_q5_k.cpp, q6_k.cpp, q2_k_q3_k.cpp,
// iq4.cpp): Q4_K/Q5_K/Q6_K/Q3_K accumulate 8 int32 lanes per block, then sums[l] += d * lane;
// Q2_K one int32 sum per block; IQ4_XS one float step per 32.
void main_k(uint r, uint t0, uint nt) {
  bool lanes_type = TYPE == kTypeQ4_K || TYPE == kTypeQ5_K || TYPE == kTypeQ6_K || TYPE == kTypeQ3_K;
  bool per16 = TYPE == kTypeQ6_K || TYPE == kTypeQ3_K || TYPE == kTypeQ2_K;  // scales per 16 elements
  uint nb = p.n_cols / 256u;
  uint n32 = p.n_cols / 32u;
  uint q_words = p.n_cols / 4u;
  uint bytes = TYPE == kTypeQ4_K ? 144u : TYPE == kTypeQ5_K ? 176u : TYPE == kTypeQ6_K ? 210u
             : TYPE == kTypeQ2_K ? 84u : TYPE == kTypeQ3_K ? 110u : 136u;
  precise float sums[TILE_T][8];
  precise float sumf[TILE_T] = float[TILE_T](0.0, 0.0, 0.0, 0.0);
  for (uint t = 0u; t < TILE_T; ++t) {
    for (uint l = 0u; l < 8u; ++l) sums[t][l] = 0.0;
  }
  for (uint b = 0u; b < nb; ++b) {
    uint o = b * bytes;
    float dw = whalf(r, o + (TYPE == kTypeQ6_K ? 208u : TYPE == kTypeQ2_K ? 80u : TYPE == kTypeQ3_K ? 108u : 0u), p.n_rows);
    float dminw = TYPE == kTypeQ2_K ? whalf(r, o + 82u, p.n_rows) : (TYPE == kTypeQ4_K || TYPE == kTypeQ5_K) ? whalf(r, o + 2u, p.n_rows) : 0.0;
    int lanes[TILE_T][8];
    int isum[TILE_T] = int[TILE_T](0, 0, 0, 0);  // Q2_K: sum of scale * 16-element dot
    int msum[TILE_T] = int[TILE_T](0, 0, 0, 0);  // sum of min * activation bsum
    for (uint t = 0u; t < TILE_T; ++t) {
      for (uint l = 0u; l < 8u; ++l) lanes[t][l] = 0;
    }
    for (uint j = 0u; j < 8u; ++j) {
      uint pl[8];
      unpack_k(r, o, j, pl);
      int sc_a = 0, sc_b = 0, mn_a = 0, mn_b = 0;  // elements l, l+8 of each lane word / l+16, l+24
      if (TYPE == kTypeQ6_K) {
        sc_a = bitfieldExtract(int(wbyte(r, o + 192u + 2u * j, p.n_rows)), 0, 8);
        sc_b = bitfieldExtract(int(wbyte(r, o + 193u + 2u * j, p.n_rows)), 0, 8);
      } else if (TYPE == kTypeQ3_K) {
        sc_a = q3_scale(r, o, 2u * j);
        sc_b = q3_scale(r, o, 2u * j + 1u);
      } else if (TYPE == kTypeQ2_K) {
        uint sa = wbyte(r, o + 2u * j, p.n_rows), sb = wbyte(r, o + 2u * j + 1u, p.n_rows);
        sc_a = int(sa & 15u);
        sc_b = int(sb & 15u);
        mn_a = int(sa >> 4);
        mn_b = int(sb >> 4);
      } else if (TYPE == kTypeIQ4_XS) {
        uint scales_h = wbyte(r, o + 2u, p.n_rows) | (wbyte(r, o + 3u, p.n_rows) << 8);
        uint ls = ((wbyte(r, o + 4u + (j >> 1), p.n_rows) >> (4u * (j & 1u))) & 15u) | (((scales_h >> (2u * j)) & 3u) << 4);
        sc_a = int(ls) - 32;
      } else {
        uvec2 sm = wscale_min_k4(r, o + 4u, j, p.n_rows);
        sc_a = int(sm.x);
        sc_b = sc_a;
        mn_a = int(sm.y);
        mn_b = mn_a;
      }
      for (uint t = 0u; t < nt; ++t) {
        uint tok = p.t_base + t0 + t;
        uint qa = tok * q_words + 64u * b + 8u * j;  // 64 words per super-block
        uint mi = 2u * (tok * n32 + 8u * b + j);
        int s32 = 0;
        for (uint l = 0u; l < 8u; ++l) {
          uint a = q[qa + l];
          if (per16) {
            int pa = sc_a * dot4(pl[l] & 0x0000ffffu, a) + sc_b * dot4(pl[l] & 0xffff0000u, a);
            if (TYPE == kTypeQ2_K) {
              isum[t] += pa;
            } else {
              lanes[t][l] += pa;
            }
          } else if (TYPE == kTypeIQ4_XS) {
            s32 += dot4(pl[l], a);
          } else {
            lanes[t][l] += sc_a * dot4(pl[l], a);
          }
        }
        uint bs = meta[mi + 1u];
        msum[t] += mn_a * bitfieldExtract(int(bs), 0, 16) + mn_b * bitfieldExtract(int(bs), 16, 16);
        if (TYPE == kTypeIQ4_XS) {
          precise float d4d8 = dw * meta_f(mi);
          precise float ds = d4d8 * float(sc_a);
          sumf[t] += ds * float(s32);
        }
      }
    }
    for (uint t = 0u; t < nt; ++t) {
      uint tok = p.t_base + t0 + t;
      float da = meta_f(2u * (tok * n32 + 8u * b));
      if (lanes_type) {
        precise float d = dw * da;
        for (uint l = 0u; l < 8u; ++l) sums[t][l] += d * float(lanes[t][l]);
      }
      if (TYPE == kTypeQ4_K || TYPE == kTypeQ5_K) {
        precise float dmin = dminw * da;
        sumf[t] -= dmin * float(msum[t]);
      } else if (TYPE == kTypeQ2_K) {
        precise float dall = da * dw;
        precise float dmin = da * dminw;
        sumf[t] += dall * float(isum[t]) - dmin * float(msum[t]);
      }
    }
  }
  for (uint t = 0u; t < nt; ++t) {
    precise float s = sumf[t];
    if (lanes_type) {
      for (uint l = 0u; l < 8u; ++l) s += sums[t][l];
    }
    y[p.y_offset + (t0 + t) * p.n_rows_total + p.row0 + r] = s;
  }
}

void main() {
  uint r = gl_GlobalInvocationID.x;
  if (r >= p.n_rows) return;
  uint t0 = gl_WorkGroupID.y * TILE_T;
  uint nt = min(TILE_T, p.n_tokens - t0);
  if (TYPE == kTypeQ2_K || TYPE == kTypeQ3_K || TYPE == kTypeQ4_K || TYPE == kTypeQ5_K || TYPE == kTypeQ6_K ||
      TYPE == kTypeIQ4_XS) {
    main_k(r, t0, nt);
  } else {
    main32(r, t0, nt);
  }
}
