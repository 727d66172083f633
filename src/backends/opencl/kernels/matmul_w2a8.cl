// Ternary weights x int8 activations (W2A8), and the activation quantization feeding it.
//
// Weight layout (cl_weights.cpp): per row, n_cols / 16 uint32 words; word j holds elements
// 16j .. 16j+15 as codes (w + 1, 2 bits): byte b, bits 2i..2i+1 hold element 16j + 4i + b, so
// (word >> 2i) & 0x03030303 is 4 consecutive codes, one per byte lane (the layout of
// microsoft/BitNet's CUDA kernel, ready for a 4x8-bit dot product). One float scale per
// scale block of a row (I2_S: the row; TQ1_0/TQ2_0: 256 elements).

inline int dot4_u8i8(uint codes, char4 q) {
#if defined(BITNET_INT8_DOT) && defined(__opencl_c_integer_dot_product_input_4x8bit)
  return dot(as_uchar4(codes), q);
#else
  const uchar4 c = as_uchar4(codes);
  return (int)c.x * q.x + (int)c.y * q.y + (int)c.z * q.z + (int)c.w * q.w;
#endif
}

// sum over 16 elements of (code - 1) * q = sum code*q - sum q (FORMATS.md), exact in int32.
inline int ternary_dot16(uint word, char16 q) {
  const int codes_q = dot4_u8i8(word & 0x03030303u, q.s0123) +
                      dot4_u8i8((word >> 2) & 0x03030303u, q.s4567) +
                      dot4_u8i8((word >> 4) & 0x03030303u, q.s89ab) +
                      dot4_u8i8((word >> 6) & 0x03030303u, q.scdef);
  const int sum_q = dot4_u8i8(0x01010101u, q.s0123) + dot4_u8i8(0x01010101u, q.s4567) +
                    dot4_u8i8(0x01010101u, q.s89ab) + dot4_u8i8(0x01010101u, q.scdef);
  return codes_q - sum_q;
}

// y[t][row0 + r] = sum_b (sum_{k in b} (code - 1) * q[t][k]) / s[t] * scale[r][b].
// One work-group per (row of the chunk, token): global (n_rows_chunk * BITNET_WG, n_tokens).
// One scale per row (I2_S): work-items stride over words (coalesced 4-byte loads), the int32
// sum is reduced exactly and scaled once, as the CPU does. Several scale blocks (TQ): each
// work-item takes whole blocks (words_per_block consecutive words) and the float terms are
// added in block order. Either way the result equals the CPU reference's bit for bit.
BITNET_KERNEL void matmul_w2a8(__global float* y, __global const char* q, __global const float* s,
                               __global const uint* codes, __global const float* scales, int n_cols,
                               int n_out, int row0, int words_per_block) {
  __local int tmp_i[BITNET_WG];
  __local float tmp_f[BITNET_WG];
  const int r = get_group_id(0);
  const int t = get_global_id(1);
  const int lid = get_local_id(0);
  const int n_words = n_cols / 16;
  const int n_blocks = n_words / words_per_block;
  __global const uint* wrow = codes + (size_t)r * n_words;
  __global const float* srow = scales + (size_t)r * n_blocks;
  __global const char* qt = q + (size_t)t * n_cols;
  if (n_blocks == 1) {
    int acc = 0;
    for (int j = lid; j < n_words; j += BITNET_WG) acc += ternary_dot16(wrow[j], vload16(j, qt));
    const int total = wg_reduce_sum_i32(tmp_i, acc);
    if (lid == 0) y[(size_t)t * n_out + row0 + r] = (float)total / s[t] * srow[0];
  } else {
    // Each work-item computes the terms of whole blocks; one work-item adds them in block
    // order, as the CPU does, so the result is the CPU's float for float.
    float acc = 0.0f;
    for (int b0 = 0; b0 < n_blocks; b0 += BITNET_WG) {
      const int b = b0 + lid;
      float term = 0.0f;
      if (b < n_blocks) {
        int dot = 0;
        for (int j = b * words_per_block; j < (b + 1) * words_per_block; ++j) {
          dot += ternary_dot16(wrow[j], vload16(j, qt));
        }
        term = (float)dot / s[t] * srow[b];
      }
      tmp_f[lid] = term;
      barrier(CLK_LOCAL_MEM_FENCE);
      if (lid == 0) {
        const int n = min(BITNET_WG, n_blocks - b0);
        for (int i = 0; i < n; ++i) acc += tmp_f[i];
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) y[(size_t)t * n_out + row0 + r] = acc;
  }
}

// Per-row int8 quantization (src/quant/act_quant.cpp): s = (float)(127 / max(max|x|, 1e-5)),
// q = clamp(rint(x * s), -128, 127) (rint: half to even), sum = sum q. A NaN is skipped by
// the max (fmax ignores it) and quantizes to 0. One work-group per row.
BITNET_KERNEL void quantize_act(__global char* q, __global float* s, __global int* sums,
                                __global const float* x, int n_cols) {
  __local float tmp_f[BITNET_WG];
  __local int tmp_i[BITNET_WG];
  const int r = get_group_id(0);
  const int lid = get_local_id(0);
  __global const float* xr = x + (size_t)r * n_cols;
  __global char* qr = q + (size_t)r * n_cols;
  float amax = 0.0f;
  for (int k = lid; k < n_cols; k += BITNET_WG) amax = fmax(amax, fabs(xr[k]));
  amax = wg_reduce_max_f32(tmp_f, amax);
#ifdef BITNET_HAS_FP64
  const float scale = (float)(127.0 / fmax((double)amax, 1e-5));
#else
  // A float above 1e-5f is above the double 1e-5 too; the division is correctly rounded
  // (-cl-fp32-correctly-rounded-divide-sqrt), which equals rounding the double quotient.
  const float scale = amax > 1e-5f ? 127.0f / amax : 12700000.0f;
#endif
  int sum = 0;
  for (int k = lid; k < n_cols; k += BITNET_WG) {
    const float v = rint(xr[k] * scale);
    const int iv = v >= 127.0f ? 127 : v <= -128.0f ? -128 : (v == v ? (int)v : 0);
    qr[k] = (char)iv;
    sum += iv;
  }
  sum = wg_reduce_sum_i32(tmp_i, sum);
  if (lid == 0) {
    s[r] = scale;
    sums[r] = sum;
  }
}
