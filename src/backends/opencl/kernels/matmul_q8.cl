// The 8-bit activation path of llama.cpp's block formats (ClOptions::quant_dot): the
// activations are quantized once per matmul exactly as the CPU backend's activation blocks
// (ggml's reference quantizers, src/quant/q8_0.cpp and q8_k.cpp), then each weight block is
// unpacked into words of 4 signed bytes and dotted with them in integers; the float steps are
// the CPU scalar kernels' (ggml_vec_dot_<type>_<q8 type>, src/quant/*.cpp) in their order, one
// rounding each (FP_CONTRACT is off), so the result equals the CPU backend bit for bit.
// Weights are read as uploaded (cl_weights.cpp): the file's blocks for Q4_0 .. IQ4_XS, Q8_0 as
// int8 quants + one float scale per 32. Helpers of matmul_quant.cl (q_half, q_scale_min_k4,
// kIq4NlValues) are reused: the sources are built as one program.
//
// Activation layout (quantize_q8_*), per token row of n_cols: n_cols int8 as n_cols / 4 uint
// words, and per 32 elements two meta words:
//   Q8_0 (Q4_0, Q5_0, Q8_0, IQ4_NL): per 32, d = max|x| / 127, q = round(x / d) (halves away
//     from zero); meta: fp16(d) as a float, 0. Element 4m + j in byte j of word m.
//   Q8_1 (Q4_1, Q5_1): the same and meta word 1: fp16(d * sum q) as a float.
//   Q8_K (Q2_K .. Q6_K, IQ4_XS): per 256, iscale = -127 / x_max (x_max: the first element of
//     largest magnitude, with its sign), d = 1 / iscale, q = min(127, rint(iscale * x)); meta
//     of each 32: d, then the two 16-element sums of q as int16 (low, high half). Within each
//     32, word l holds elements l, l+8, l+16, l+24 (the CPU's 8 accumulator lanes).

#if defined(BITNET_INT8_DOT) && defined(cl_khr_integer_dot_product)
// Compiled only where the device has cl_khr_integer_dot_product (untested on PoCL, which lacks it).
#pragma OPENCL EXTENSION cl_khr_integer_dot_product : enable
inline int dot4(uint a, uint b) { return dot_4x8packed_ss_int(a, b); }
#else
inline int dot4(uint a, uint b) {
  return (int)(char)a * (int)(char)b + (int)(char)(a >> 8) * (int)(char)(b >> 8) +
         (int)(char)(a >> 16) * (int)(char)(b >> 16) + (int)(char)(a >> 24) * (int)(char)(b >> 24);
}
#endif

// Correctly rounded a / b for normal operands (long division of the mantissas); other cases
// (and subnormal results) fall back to the device's division.
inline float q8_div(float a, float b) {
  if (a == 0.0f) return 0.0f;
  const uint ua = as_uint(a), ub = as_uint(b);
  const uint sign = (ua ^ ub) & 0x80000000u;
  const int ea = (int)((ua >> 23) & 0xffu), eb = (int)((ub >> 23) & 0xffu);
  if (ea == 0 || eb == 0 || ea == 255 || eb == 255) return a / b;
  uint ma = (ua & 0x7fffffu) | 0x800000u;
  const uint mb = (ub & 0x7fffffu) | 0x800000u;
  int e = ea - eb;
  if (ma < mb) {
    ma <<= 1;
    e -= 1;
  }
  uint qv = 0u, rem = ma;  // 24 quotient bits and a guard bit; the remainder is the sticky bit
  for (int i = 0; i < 25; ++i) {
    qv <<= 1;
    if (rem >= mb) {
      rem -= mb;
      qv |= 1u;
    }
    rem <<= 1;
  }
  uint mant = qv >> 1;
  if ((qv & 1u) == 1u && (rem != 0u || (mant & 1u) == 1u)) mant += 1u;
  const int be = e + 127;
  if (be <= 0 || be >= 255) return a / b;
  return as_float(sign | (((uint)(be - 1) << 23) + mant));
}

// x rounded to the nearest fp16 (ties to even) and widened, as core/fp16.h, in integers.
inline float q8_round_half(float x) {
  const uint sign = as_uint(x) & 0x80000000u;
  const float a = fabs(x);
  if (a != a) return x;
  if (a >= 65520.0f) return as_float(sign | 0x7f800000u);
  if (a < 6.103515625e-05f) {  // 2^-14: a subnormal fp16, a multiple of 2^-24 (exact products)
    const float r = rint(a * 16777216.0f) * 5.9604644775390625e-08f;
    return as_float(sign | as_uint(r));
  }
  uint m = as_uint(a);
  m = (m + 0xfffu + ((m >> 13) & 1u)) & ~0x1fffu;
  return as_float(sign | m);
}

// std::round to int8 (halves away from zero); a non-finite value gives 0, as the CPU.
inline int q8_round_away(float v) { return isfinite(v) ? (int)round(v) : 0; }

// One work-item per 32-element block (global: n_blocks); with_sum: Q8_1.
inline void quantize_q8_32(__global uint* q, __global uint* meta, __global const float* x, uint n_blocks, int with_sum) {
  const uint blk = get_global_id(0);
  if (blk >= n_blocks) return;
  __global const float* xb = x + (size_t)blk * 32;
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float v = fabs(xb[j]);
    amax = amax < v ? v : amax;  // std::max: a NaN is skipped
  }
  const float d = q8_div(amax, 127.0f);
  const float id = d != 0.0f ? q8_div(1.0f, d) : 0.0f;
  int sum = 0;
  for (int i = 0; i < 8; ++i) {
    uint word = 0u;
    for (int j = 0; j < 4; ++j) {
      const int qv = q8_round_away(xb[4 * i + j] * id);
      sum += qv;
      word |= ((uint)qv & 0xffu) << (8 * j);
    }
    q[(size_t)blk * 8 + i] = word;
  }
  meta[2 * (size_t)blk] = as_uint(q8_round_half(d));
  meta[2 * (size_t)blk + 1] = with_sum ? as_uint(q8_round_half((float)sum * d)) : 0u;
}

__kernel void quantize_q8_0(__global uint* q, __global uint* meta, __global const float* x, uint n_blocks) {
  quantize_q8_32(q, meta, x, n_blocks, 0);
}
__kernel void quantize_q8_1(__global uint* q, __global uint* meta, __global const float* x, uint n_blocks) {
  quantize_q8_32(q, meta, x, n_blocks, 1);
}

// One work-item per 256-element block (global: n_blocks).
__kernel void quantize_q8_k(__global uint* q, __global uint* meta, __global const float* x, uint n_blocks) {
  const uint blk = get_global_id(0);
  if (blk >= n_blocks) return;
  __global const float* xb = x + (size_t)blk * 256;
  float amax = 0.0f, xmax = 0.0f;
  for (int j = 0; j < 256; ++j) {
    const float a = fabs(xb[j]);
    if (a > amax) {
      amax = a;
      xmax = xb[j];
    }
  }
  const float iscale = amax == 0.0f ? 0.0f : q8_div(-127.0f, xmax);
  const float d = amax == 0.0f ? 0.0f : q8_div(1.0f, iscale);
  for (int s = 0; s < 8; ++s) {
    int sum[2] = {0, 0};  // elements 0..15 (bytes 0, 1 of the words), 16..31 (bytes 2, 3)
    for (int l = 0; l < 8; ++l) {
      uint word = 0u;
      for (int m = 0; m < 4; ++m) {
        const int qv = min(127, (int)rint(iscale * xb[32 * s + l + 8 * m]));
        sum[m >> 1] += qv;
        word |= ((uint)qv & 0xffu) << (8 * m);
      }
      q[(size_t)blk * 64 + 8 * s + l] = word;
    }
    meta[2 * ((size_t)blk * 8 + s)] = as_uint(d);
    meta[2 * ((size_t)blk * 8 + s) + 1] = ((uint)sum[0] & 0xffffu) | ((uint)sum[1] << 16);
  }
}

// ---- weight unpacking

#define QT_Q4_0 0
#define QT_Q4_1 1
#define QT_Q5_0 2
#define QT_Q5_1 3
#define QT_Q8_0 4
#define QT_IQ4_NL 5
#define QT_Q2_K 6
#define QT_Q3_K 7
#define QT_Q4_K 8
#define QT_Q5_K 9
#define QT_Q6_K 10
#define QT_IQ4_XS 11

inline int qt_block_bytes(int type) {
  switch (type) {
    case QT_Q4_0: return 18;
    case QT_Q4_1: return 20;
    case QT_Q5_0: return 22;
    case QT_Q5_1: return 24;
    case QT_IQ4_NL: return 18;
    case QT_Q2_K: return 84;
    case QT_Q3_K: return 110;
    case QT_Q4_K: return 144;
    case QT_Q5_K: return 176;
    case QT_Q6_K: return 210;
    default: return 136;  // IQ4_XS
  }
}

// 4 bytes at p, little-endian (blocks sit at even offsets only: read byte by byte).
inline uint ld4(qblk_t p) { return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24); }
// Bytes v - k for bytes v <= 127 and k <= 128 (k4: k in every byte), as signed bytes, no borrows.
inline uint sub_bytes(uint v, uint k4) { return ((v | 0x80808080u) - k4) ^ 0x80808080u; }
// The 4 low bits of h spread to bit 4 of bytes 0..3.
inline uint spread4(uint h) { return ((h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21)) << 4; }
// IQ4_NL table values of 4 codes (low nibble of each byte) as 4 signed bytes.
inline uint iq4_bytes(uint nib) {
  uint v = 0u;
  for (int m = 0; m < 4; ++m) v |= ((uint)kIq4NlValues[(nib >> (8 * m)) & 15u] & 0xffu) << (8 * m);
  return v;
}
// Byte transpose: word m of the result holds byte m of a, b, c, d in bytes 0..3.
inline void transpose4(uint a, uint b, uint c, uint d, uint* o) {
  const uint t0 = (a & 0x00ff00ffu) | ((b & 0x00ff00ffu) << 8);  // a0 b0 a2 b2
  const uint t1 = ((a >> 8) & 0x00ff00ffu) | (b & 0xff00ff00u);  // a1 b1 a3 b3
  const uint t2 = (c & 0x00ff00ffu) | ((d & 0x00ff00ffu) << 8);  // c0 d0 c2 d2
  const uint t3 = ((c >> 8) & 0x00ff00ffu) | (d & 0xff00ff00u);  // c1 d1 c3 d3
  o[0] = (t0 & 0xffffu) | (t2 << 16);
  o[1] = (t1 & 0xffffu) | (t3 << 16);
  o[2] = (t0 >> 16) | (t2 & 0xffff0000u);
  o[3] = (t1 >> 16) | (t3 & 0xffff0000u);
}

// A 32-element block -> 8 words of signed codes (elements 4i..4i+3 in word i), its scale d
// and (Q4_1/Q5_1) min m. blk: the block's bytes (Q8_0: its 32 int8, scale in *dw already).
inline void unpack32(int type, qblk_t blk, uint* wq, float* dw, float* mw) {
  *mw = 0.0f;
  if (type == QT_Q8_0) {
    for (int i = 0; i < 8; ++i) wq[i] = ld4(blk + 4 * i);
    return;
  }
  *dw = vload_half(0, (__global const half*)blk);
  if (type == QT_IQ4_NL) {
    for (int i = 0; i < 4; ++i) {
      const uint qs = ld4(blk + 2 + 4 * i);
      wq[i] = iq4_bytes(qs & 0x0f0f0f0fu);
      wq[4 + i] = iq4_bytes((qs >> 4) & 0x0f0f0f0fu);
    }
    return;
  }
  const bool q5 = type == QT_Q5_0 || type == QT_Q5_1;
  const bool has_m = type == QT_Q4_1 || type == QT_Q5_1;
  if (has_m) *mw = vload_half(1, (__global const half*)blk);
  const int qh_at = has_m ? 4 : 2;
  const uint qh = q5 ? ld4(blk + qh_at) : 0u;
  qblk_t qs = blk + qh_at + (q5 ? 4 : 0);
  for (int i = 0; i < 4; ++i) {
    const uint b = ld4(qs + 4 * i);
    uint lo = b & 0x0f0f0f0fu;         // elements 4i .. 4i+3
    uint hi = (b >> 4) & 0x0f0f0f0fu;  // elements 16+4i ..
    if (q5) {
      lo |= spread4(qh >> (4 * i));
      hi |= spread4(qh >> (16 + 4 * i));
    }
    if (type == QT_Q4_0) {
      lo = sub_bytes(lo, 0x08080808u);
      hi = sub_bytes(hi, 0x08080808u);
    } else if (type == QT_Q5_0) {
      lo = sub_bytes(lo, 0x10101010u);
      hi = sub_bytes(hi, 0x10101010u);
    }
    wq[i] = lo;
    wq[4 + i] = hi;
  }
}

#define QDOT_TILE 4

// y[t][row0 + r] for one row r of the chunk and a tile of QDOT_TILE tokens, 32-element formats.
// Global (n_rows_chunk, ceil(n_tokens / QDOT_TILE)).
inline void qdot32(int type, __global float* y, __global const uint* q, __global const uint* meta,
                   __global const uchar* w, __global const float* wd, int n_cols, int n_out, int row0,
                   int n_rows_chunk, int n_tokens) {
  const int r = get_global_id(0);
  const int t0 = get_global_id(1) * QDOT_TILE;
  if (r >= n_rows_chunk || t0 >= n_tokens) return;
  const int nt = min(QDOT_TILE, n_tokens - t0);
  const int nb = n_cols / 32;
  const int q_words = n_cols / 4;
  const size_t row_bytes = type == QT_Q8_0 ? (size_t)n_cols : (size_t)nb * qt_block_bytes(type);
  float acc[QDOT_TILE] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int b = 0; b < nb; ++b) {
    uint wq[8];
    float dw = 0.0f, mw = 0.0f;
    if (type == QT_Q8_0) {
      dw = wd[(size_t)r * nb + b];
      unpack32(type, w + (size_t)r * row_bytes + 32 * b, wq, &dw, &mw);
    } else {
      unpack32(type, w + (size_t)r * row_bytes + (size_t)b * qt_block_bytes(type), wq, &dw, &mw);
    }
    for (int t = 0; t < nt; ++t) {
      const size_t tok = (size_t)(t0 + t);
      __global const uint* qa = q + tok * q_words + 8 * b;
      int s = 0;
      for (int i = 0; i < 8; ++i) s += dot4(wq[i], qa[i]);
      const size_t mi = 2 * (tok * nb + b);
      const float da = as_float(meta[mi]);
      if (type == QT_Q4_0) {
        acc[t] += (float)s * dw * da;
      } else if (type == QT_Q4_1 || type == QT_Q5_1) {
        const float d = dw * da;
        const float ms = mw * as_float(meta[mi + 1]);
        acc[t] += d * (float)s + ms;
      } else {  // Q5_0, Q8_0, IQ4_NL: sumi * d with d = dw * da
        const float d = dw * da;
        acc[t] += (float)s * d;
      }
    }
  }
  for (int t = 0; t < nt; ++t) y[(size_t)(t0 + t) * n_out + row0 + r] = acc[t];
}

// Sub-block j (32 elements) of the K-format super-block `blk` -> lane-major signed codes:
// pl[l] holds elements l, l+8, l+16, l+24.
inline void unpack_k(int type, qblk_t blk, int j, uint* pl) {
  uint n[8];
  if (type == QT_Q4_K || type == QT_Q5_K) {
    const bool q5 = type == QT_Q5_K;
    qblk_t qs = blk + (q5 ? 48 : 16) + 32 * (j >> 1);
    const int shift = 4 * (j & 1);
    for (int i = 0; i < 8; ++i) {
      n[i] = (ld4(qs + 4 * i) >> shift) & 0x0f0f0f0fu;
      if (q5) n[i] |= ((ld4(blk + 16 + 4 * i) >> j) & 0x01010101u) << 4;
    }
  } else if (type == QT_Q2_K || type == QT_Q3_K) {
    // 2-bit codes of element 128h + 32k + l: bits 2k of qs[32h + l] (Q2_K qs at 16, Q3_K at
    // 32); Q3_K: code - 4 where bit e / 32 of hmask[l] is clear.
    const bool q3 = type == QT_Q3_K;
    qblk_t qs = blk + (q3 ? 32 : 16) + 32 * (j >> 2);
    const int shift = 2 * (j & 3);
    for (int i = 0; i < 8; ++i) {
      uint v = (ld4(qs + 4 * i) >> shift) & 0x03030303u;
      if (q3) v = sub_bytes(v | (((ld4(blk + 4 * i) >> j) & 0x01010101u) << 2), 0x04040404u);
      n[i] = v;
    }
  } else if (type == QT_IQ4_XS) {  // sub-block j: qs[16j .. 16j+15] at 8, as an IQ4_NL block
    for (int i = 0; i < 4; ++i) {
      const uint qs = ld4(blk + 8 + 16 * j + 4 * i);
      n[i] = iq4_bytes(qs & 0x0f0f0f0fu);
      n[4 + i] = iq4_bytes((qs >> 4) & 0x0f0f0f0fu);
    }
  } else {  // Q6_K: element 128h + 32kk + l: ql[64h + 32(kk & 1) + l] (nibble kk / 2), qh[32h + l] bits 2kk
    const int h = j >> 2, kk = j & 3;
    qblk_t ql = blk + 64 * h + 32 * (kk & 1);
    qblk_t qh = blk + 128 + 32 * h;
    for (int i = 0; i < 8; ++i) {
      const uint v = ((ld4(ql + 4 * i) >> (4 * (kk >> 1))) & 0x0f0f0f0fu) | (((ld4(qh + 4 * i) >> (2 * kk)) & 0x03030303u) << 4);
      n[i] = sub_bytes(v, 0x20202020u);
    }
  }
  transpose4(n[0], n[2], n[4], n[6], pl);
  transpose4(n[1], n[3], n[5], n[7], pl + 4);
}

// Q3_K's signed 6-bit scale of 16-element group g (scale bytes at 96).
inline int q3k_scale(qblk_t blk, int g) {
  const int lo = g < 8 ? (blk[96 + g] & 15) : (blk[88 + g] >> 4);
  return (lo | (((blk[104 + (g & 3)] >> (2 * (g >> 2))) & 3) << 4)) - 32;
}

// The K formats, each as its CPU scalar dot (quant/q4_k_q5_k.cpp, q6_k.cpp, q2_k_q3_k.cpp,
// iq4.cpp): Q4_K/Q5_K/Q6_K/Q3_K accumulate 8 int32 lanes per block, then sums[l] += d * lane;
// Q2_K one int32 sum per block; IQ4_XS one float step per 32.
inline void qdot_k(int type, __global float* y, __global const uint* q, __global const uint* meta,
                   __global const uchar* w, int n_cols, int n_out, int row0, int n_rows_chunk, int n_tokens) {
  const int r = get_global_id(0);
  const int t0 = get_global_id(1) * QDOT_TILE;
  if (r >= n_rows_chunk || t0 >= n_tokens) return;
  const int nt = min(QDOT_TILE, n_tokens - t0);
  const bool lanes_type = type == QT_Q4_K || type == QT_Q5_K || type == QT_Q6_K || type == QT_Q3_K;
  const bool per16 = type == QT_Q6_K || type == QT_Q3_K || type == QT_Q2_K;  // scales per 16 elements
  const int nb = n_cols / 256;
  const int n32 = n_cols / 32;
  const int q_words = n_cols / 4;
  const int bytes = qt_block_bytes(type);
  float sums[QDOT_TILE][8];
  float sumf[QDOT_TILE] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int t = 0; t < QDOT_TILE; ++t) {
    for (int l = 0; l < 8; ++l) sums[t][l] = 0.0f;
  }
  for (int b = 0; b < nb; ++b) {
    qblk_t blk = w + ((size_t)r * nb + b) * bytes;
    const float dw = vload_half(0, (__global const half*)(blk + (type == QT_Q6_K ? 208 : type == QT_Q2_K ? 80 : type == QT_Q3_K ? 108 : 0)));
    const float dminw = type == QT_Q2_K ? vload_half(0, (__global const half*)(blk + 82))
                        : (type == QT_Q4_K || type == QT_Q5_K) ? vload_half(1, (__global const half*)blk) : 0.0f;
    int lanes[QDOT_TILE][8];
    int isum[QDOT_TILE] = {0, 0, 0, 0};  // Q2_K: sum of scale * 16-element dot
    int msum[QDOT_TILE] = {0, 0, 0, 0};  // sum of min * activation bsum
    for (int t = 0; t < QDOT_TILE; ++t) {
      for (int l = 0; l < 8; ++l) lanes[t][l] = 0;
    }
    for (int j = 0; j < 8; ++j) {
      uint pl[8];
      unpack_k(type, blk, j, pl);
      int sc_a = 0, sc_b = 0, mn_a = 0, mn_b = 0;  // elements l, l+8 of each lane word / l+16, l+24
      if (type == QT_Q6_K) {
        sc_a = ((__global const char*)blk)[192 + 2 * j];
        sc_b = ((__global const char*)blk)[193 + 2 * j];
      } else if (type == QT_Q3_K) {
        sc_a = q3k_scale(blk, 2 * j);
        sc_b = q3k_scale(blk, 2 * j + 1);
      } else if (type == QT_Q2_K) {
        const int sa = blk[2 * j], sb = blk[2 * j + 1];
        sc_a = sa & 15;
        sc_b = sb & 15;
        mn_a = sa >> 4;
        mn_b = sb >> 4;
      } else if (type == QT_IQ4_XS) {
        const int scales_h = blk[2] | (blk[3] << 8);
        const int ls = ((blk[4 + (j >> 1)] >> (4 * (j & 1))) & 15) | (((scales_h >> (2 * j)) & 3) << 4);
        sc_a = ls - 32;
      } else {
        q_scale_min_k4(blk + 4, j, &sc_a, &mn_a);
        sc_b = sc_a;
        mn_b = mn_a;
      }
      for (int t = 0; t < nt; ++t) {
        const size_t tok = (size_t)(t0 + t);
        __global const uint* qa = q + tok * q_words + 64 * b + 8 * j;  // 64 words per super-block
        const size_t mi = 2 * (tok * n32 + 8 * b + j);
        int s32 = 0;
        for (int l = 0; l < 8; ++l) {
          const uint a = qa[l];
          if (per16) {
            const int pa = sc_a * dot4(pl[l] & 0x0000ffffu, a) + sc_b * dot4(pl[l] & 0xffff0000u, a);
            if (type == QT_Q2_K) {
              isum[t] += pa;
            } else {
              lanes[t][l] += pa;
            }
          } else if (type == QT_IQ4_XS) {
            s32 += dot4(pl[l], a);
          } else {
            lanes[t][l] += sc_a * dot4(pl[l], a);
          }
        }
        const uint bs = meta[mi + 1];
        msum[t] += mn_a * (((int)(bs << 16)) >> 16) + mn_b * (((int)bs) >> 16);
        if (type == QT_IQ4_XS) {
          const float d4d8 = dw * as_float(meta[mi]);
          const float ds = d4d8 * (float)sc_a;
          sumf[t] += ds * (float)s32;
        }
      }
    }
    for (int t = 0; t < nt; ++t) {
      const size_t tok = (size_t)(t0 + t);
      const float da = as_float(meta[2 * (tok * n32 + 8 * b)]);
      if (lanes_type) {
        const float d = dw * da;
        for (int l = 0; l < 8; ++l) sums[t][l] += d * (float)lanes[t][l];
      }
      if (type == QT_Q4_K || type == QT_Q5_K) {
        const float dmin = dminw * da;
        sumf[t] -= dmin * (float)msum[t];
      } else if (type == QT_Q2_K) {
        const float dall = da * dw;
        const float dmin = da * dminw;
        sumf[t] += dall * (float)isum[t] - dmin * (float)msum[t];
      }
    }
  }
  for (int t = 0; t < nt; ++t) {
    float s = sumf[t];
    if (lanes_type) {
      for (int l = 0; l < 8; ++l) s += sums[t][l];
    }
    y[(size_t)(t0 + t) * n_out + row0 + r] = s;
  }
}

// Kernels matmul_<type>_q8(y, q, meta, w, wd, n_cols, n_out, row0, n_rows_chunk, n_tokens):
// y: [n_tokens][n_out]; q/meta: the quantized activations; w/wd: one chunk of the weight (wd:
// Q8_0's scales, else unused).
#define DEFINE_QDOT32(NAME, TYPE)                                                                          \
  __kernel void matmul_##NAME##_q8(__global float* y, __global const uint* q, __global const uint* meta,    \
                                   __global const uchar* w, __global const float* wd, int n_cols,          \
                                   int n_out, int row0, int n_rows_chunk, int n_tokens) {                  \
    qdot32(TYPE, y, q, meta, w, wd, n_cols, n_out, row0, n_rows_chunk, n_tokens);                          \
  }
#define DEFINE_QDOTK(NAME, TYPE)                                                                           \
  __kernel void matmul_##NAME##_q8(__global float* y, __global const uint* q, __global const uint* meta,    \
                                   __global const uchar* w, __global const float* wd, int n_cols,          \
                                   int n_out, int row0, int n_rows_chunk, int n_tokens) {                  \
    qdot_k(TYPE, y, q, meta, w, n_cols, n_out, row0, n_rows_chunk, n_tokens);                              \
  }

DEFINE_QDOT32(q4_0, QT_Q4_0)
DEFINE_QDOT32(q4_1, QT_Q4_1)
DEFINE_QDOT32(q5_0, QT_Q5_0)
DEFINE_QDOT32(q5_1, QT_Q5_1)
DEFINE_QDOT32(q8_0, QT_Q8_0)
DEFINE_QDOT32(iq4_nl, QT_IQ4_NL)
DEFINE_QDOTK(q2_k, QT_Q2_K)
DEFINE_QDOTK(q3_k, QT_Q3_K)
DEFINE_QDOTK(q4_k, QT_Q4_K)
DEFINE_QDOTK(q5_k, QT_Q5_K)
DEFINE_QDOTK(q6_k, QT_Q6_K)
DEFINE_QDOTK(iq4_xs, QT_IQ4_XS)
