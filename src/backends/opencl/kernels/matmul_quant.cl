// llama.cpp's block-quantized weights (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS),
// uploaded as the file's blocks, unchanged (cl_weights.cpp), and dequantized inside the
// kernels: LOAD_<type>(w, wd, i) is element i of the chunk (row-major; rows are whole blocks)
// with the arithmetic of quant::dequantize (src/quant/*.cpp, ggml's dequantize_row_*), one
// float operation at a time (FP_CONTRACT is off), so that each element equals the CPU's
// dequantized value bit for bit. The matmul and embed kernels are the float ones
// (matmul_float.cl: 8 lanes a row in the CPU's dot_f32 order), against float activations.
// Every block size is even, so each fp16 field sits at an even byte offset and is read with
// vload_half; multi-byte integer fields (Q5's qh, IQ4_XS's scales_h) are read byte by byte.
// `wd` is unused (no separate scales buffer).

typedef __global const uchar* qblk_t;

// fp16 at (even) byte offset `off` of the chunk.
inline float q_half(__global const void* w, size_t off) { return vload_half(off / 2, (__global const half*)w); }

// Q4_0: 18 bytes = fp16 d, 16 bytes of nibbles (element j < 16: low nibble of qs[j]; j >= 16:
// high nibble of qs[j - 16]). value = (q - 8) * d.
inline float load_q4_0(__global const void* w, size_t i) {
  const size_t off = (i / 32) * 18;
  const int j = (int)(i % 32);
  const uchar b = ((qblk_t)w)[off + 2 + (j & 15)];
  const int q = j < 16 ? (b & 15) : (b >> 4);
  return (float)(q - 8) * q_half(w, off);
}

// Q4_1: 20 bytes = fp16 d, fp16 m, 16 bytes of nibbles. value = q * d + m.
inline float load_q4_1(__global const void* w, size_t i) {
  const size_t off = (i / 32) * 20;
  const int j = (int)(i % 32);
  const uchar b = ((qblk_t)w)[off + 4 + (j & 15)];
  const int q = j < 16 ? (b & 15) : (b >> 4);
  return (float)q * q_half(w, off) + q_half(w, off + 2);
}

// Q5_0: 22 bytes = fp16 d, uint32 qh (bit j: fifth bit of element j), 16 bytes of nibbles.
// value = (q - 16) * d.
inline float load_q5_0(__global const void* w, size_t i) {
  const size_t off = (i / 32) * 22;
  const int j = (int)(i % 32);
  qblk_t blk = (qblk_t)w + off;
  const uchar b = blk[6 + (j & 15)];
  const int q = (j < 16 ? (b & 15) : (b >> 4)) | (((blk[2 + j / 8] >> (j % 8)) & 1) << 4);
  return (float)(q - 16) * q_half(w, off);
}

// Q5_1: 24 bytes = fp16 d, fp16 m, uint32 qh, 16 bytes of nibbles. value = q * d + m.
inline float load_q5_1(__global const void* w, size_t i) {
  const size_t off = (i / 32) * 24;
  const int j = (int)(i % 32);
  qblk_t blk = (qblk_t)w + off;
  const uchar b = blk[8 + (j & 15)];
  const int q = (j < 16 ? (b & 15) : (b >> 4)) | (((blk[4 + j / 8] >> (j % 8)) & 1) << 4);
  return (float)q * q_half(w, off) + q_half(w, off + 2);
}

// Q4_K / Q5_K 6-bit scale and min of sub-block s (0..7) from the 12 scale bytes
// (quant::get_scale_min_k4).
inline void q_scale_min_k4(qblk_t q, int s, int* sc, int* mn) {
  if (s < 4) {
    *sc = q[s] & 63;
    *mn = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 15) | ((q[s - 4] >> 6) << 4);
    *mn = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}

// Q4_K: 144 bytes = fp16 d, fp16 dmin, 12 scale bytes, 128 bytes of nibbles. Element
// e = 64c + 32k + l is nibble k of qs[32c + l]; value = (d * sc) * q - dmin * mn.
inline float load_q4_k(__global const void* w, size_t i) {
  const size_t off = (i / 256) * 144;
  const int e = (int)(i % 256);
  qblk_t blk = (qblk_t)w + off;
  int sc, mn;
  q_scale_min_k4(blk + 4, e / 32, &sc, &mn);
  const uchar b = blk[16 + 32 * (e / 64) + e % 32];
  const int q = (e / 32) % 2 == 0 ? (b & 15) : (b >> 4);
  const float d = q_half(w, off) * (float)sc;
  const float m = q_half(w, off + 2) * (float)mn;
  return d * (float)q - m;
}

// Q5_K: 176 bytes = fp16 d, fp16 dmin, 12 scale bytes, 32 bytes qh (bit e/32 of qh[e % 32]
// is element e's fifth bit), 128 bytes of nibbles as Q4_K.
inline float load_q5_k(__global const void* w, size_t i) {
  const size_t off = (i / 256) * 176;
  const int e = (int)(i % 256);
  qblk_t blk = (qblk_t)w + off;
  int sc, mn;
  q_scale_min_k4(blk + 4, e / 32, &sc, &mn);
  const uchar b = blk[48 + 32 * (e / 64) + e % 32];
  const int q = ((e / 32) % 2 == 0 ? (b & 15) : (b >> 4)) + 16 * ((blk[16 + e % 32] >> (e / 32)) & 1);
  const float d = q_half(w, off) * (float)sc;
  const float m = q_half(w, off + 2) * (float)mn;
  return d * (float)q - m;
}

// Q6_K: 210 bytes = ql[128], qh[64], int8 scales[16], fp16 d. Element e = 128h + 32k + l:
// low 4 bits nibble (k / 2) of ql[64h + 32(k % 2) + l], high 2 bits (qh[32h + l] >> 2k) & 3;
// value = (d * scale[e / 16]) * (q - 32).
inline float load_q6_k(__global const void* w, size_t i) {
  const size_t off = (i / 256) * 210;
  const int e = (int)(i % 256);
  qblk_t blk = (qblk_t)w + off;
  const int h = e / 128, k = (e % 128) / 32, l = e % 32;
  const uchar lo = blk[64 * h + 32 * (k % 2) + l];
  const int q = (k < 2 ? (lo & 15) : (lo >> 4)) | (((blk[128 + 32 * h + l] >> (2 * k)) & 3) << 4);
  const float sc = (float)((__global const char*)blk)[192 + e / 16];
  return q_half(w, off + 208) * sc * (float)(q - 32);
}

// The 2-bit code of element e of a Q2_K/Q3_K qs[64]: (qs[32(e / 128) + e % 32] >> 2((e % 128) / 32)) & 3.
inline int q_low2(qblk_t qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

// Q2_K: 84 bytes = scales[16] (low nibble scale, high nibble min), qs[64], fp16 d, fp16 dmin.
// value = (d * sc) * q - dmin * mn, per 16 elements.
inline float load_q2_k(__global const void* w, size_t i) {
  const size_t off = (i / 256) * 84;
  const int e = (int)(i % 256);
  qblk_t blk = (qblk_t)w + off;
  const uchar s = blk[e / 16];
  const float dl = q_half(w, off + 80) * (float)(s & 15);
  const float ml = q_half(w, off + 82) * (float)(s >> 4);
  return dl * (float)q_low2(blk + 16, e) - ml;
}

// Q3_K: 110 bytes = hmask[32], qs[64], 12 scale bytes (16 6-bit scales), fp16 d.
// value = (d * (scale - 32)) * (low2 - (hmask bit ? 0 : 4)).
inline float load_q3_k(__global const void* w, size_t i) {
  const size_t off = (i / 256) * 110;
  const int e = (int)(i % 256);
  qblk_t blk = (qblk_t)w + off;
  const int s = e / 16;
  qblk_t scales = blk + 96;
  const int sc = (s < 8 ? (scales[s] & 15) : (scales[s - 8] >> 4)) | (((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4);
  const float dl = q_half(w, off + 108) * (float)(sc - 32);
  const int high = (blk[e % 32] >> (e / 32)) & 1;
  return dl * (float)(q_low2(blk + 32, e) - (high ? 0 : 4));
}

__constant char kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IQ4_NL: 18 bytes = fp16 d, 16 bytes of nibbles (as Q4_0) indexing kIq4NlValues. value = d * v.
inline float load_iq4_nl(__global const void* w, size_t i) {
  const size_t off = (i / 32) * 18;
  const int j = (int)(i % 32);
  const uchar b = ((qblk_t)w)[off + 2 + (j & 15)];
  return q_half(w, off) * (float)kIq4NlValues[j < 16 ? (b & 15) : (b >> 4)];
}

// IQ4_XS: 136 bytes = fp16 d, uint16 scales_h, scales_l[4], qs[128]; sub-block s of 32 has the
// 6-bit scale ls = ((scales_l[s / 2] >> 4(s % 2)) & 15) | ((scales_h >> 2s) & 3) << 4 and its
// 16 bytes of nibbles as IQ4_NL. value = (d * (ls - 32)) * v.
inline float load_iq4_xs(__global const void* w, size_t i) {
  const size_t off = (i / 256) * 136;
  const int e = (int)(i % 256);
  qblk_t blk = (qblk_t)w + off;
  const int s = e / 32, j = e % 32;
  const int scales_h = blk[2] | (blk[3] << 8);
  const int ls = ((blk[4 + s / 2] >> (4 * (s % 2))) & 15) | (((scales_h >> (2 * s)) & 3) << 4);
  const float dl = q_half(w, off) * (float)(ls - 32);
  const uchar b = blk[8 + 16 * s + (j & 15)];
  return dl * (float)kIq4NlValues[j < 16 ? (b & 15) : (b >> 4)];
}

#define LOAD_Q4_0(w, wd, i) load_q4_0((w), (i))
#define LOAD_Q4_1(w, wd, i) load_q4_1((w), (i))
#define LOAD_Q5_0(w, wd, i) load_q5_0((w), (i))
#define LOAD_Q5_1(w, wd, i) load_q5_1((w), (i))
#define LOAD_Q2_K(w, wd, i) load_q2_k((w), (i))
#define LOAD_Q3_K(w, wd, i) load_q3_k((w), (i))
#define LOAD_Q4_K(w, wd, i) load_q4_k((w), (i))
#define LOAD_Q5_K(w, wd, i) load_q5_k((w), (i))
#define LOAD_Q6_K(w, wd, i) load_q6_k((w), (i))
#define LOAD_IQ4_NL(w, wd, i) load_iq4_nl((w), (i))
#define LOAD_IQ4_XS(w, wd, i) load_iq4_xs((w), (i))

DEFINE_EMBED(q4_0, LOAD_Q4_0)
DEFINE_EMBED(q4_1, LOAD_Q4_1)
DEFINE_EMBED(q5_0, LOAD_Q5_0)
DEFINE_EMBED(q5_1, LOAD_Q5_1)
DEFINE_EMBED(q2_k, LOAD_Q2_K)
DEFINE_EMBED(q3_k, LOAD_Q3_K)
DEFINE_EMBED(q4_k, LOAD_Q4_K)
DEFINE_EMBED(q5_k, LOAD_Q5_K)
DEFINE_EMBED(q6_k, LOAD_Q6_K)
DEFINE_EMBED(iq4_nl, LOAD_IQ4_NL)
DEFINE_EMBED(iq4_xs, LOAD_IQ4_XS)
DEFINE_MATMUL(q4_0, LOAD_Q4_0)
DEFINE_MATMUL(q4_1, LOAD_Q4_1)
DEFINE_MATMUL(q5_0, LOAD_Q5_0)
DEFINE_MATMUL(q5_1, LOAD_Q5_1)
DEFINE_MATMUL(q2_k, LOAD_Q2_K)
DEFINE_MATMUL(q3_k, LOAD_Q3_K)
DEFINE_MATMUL(q4_k, LOAD_Q4_K)
DEFINE_MATMUL(q5_k, LOAD_Q5_K)
DEFINE_MATMUL(q6_k, LOAD_Q6_K)
DEFINE_MATMUL(iq4_nl, LOAD_IQ4_NL)
DEFINE_MATMUL(iq4_xs, LOAD_IQ4_XS)
