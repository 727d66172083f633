// NEON set, float weights: matmul over F32/F16/BF16 rows read in place (the tied F16
// token embedding as output head is the largest tensor read per decoded token), FMA into
// several accumulators; decode row after row, prefill in tiles. Other formats are dequantized block by block. Sums run in another
// order than the scalar twin's, so results differ from it in the last bits.
#include <arm_neon.h>

#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_neon.h"
#include "backends/cpu/kernels_float_driver.h"

namespace bitnet::cpu::neon {

namespace {

// Each unblocked format: load4(row, k) = weights k .. k+3 of a row as floats (k a multiple of
// 4), and at(row, k) = weight k, for a row's last n_cols % 4 weights.
struct F32Row {
  static float32x4_t load4(const uint8_t* row, int64_t k) { return vld1q_f32(reinterpret_cast<const float*>(row) + k); }
  static float at(const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
};

struct F16Row {  // FCVTL: half to float is exact, as the scalar twin's table
  static float32x4_t load4(const uint8_t* row, int64_t k) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static float at(const uint8_t* row, int64_t k) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
  }
};

struct BF16Row {  // bf16 is the high half of an f32
  static float32x4_t load4(const uint8_t* row, int64_t k) {
    const uint16x4_t h = vld1_u16(reinterpret_cast<const uint16_t*>(row) + k);
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
  }
  static float at(const uint8_t* row, int64_t k) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

// Tiles of R rows from r x T tokens from t: each weight vector feeds T tokens, each token
// vector R rows; R * T independent accumulators hide the FMA latency.
template <class Row>
struct PlainTiles {
  template <int R, int T>
  static void tile(const CpuWeight& w, const float* x, int64_t t, int64_t r, float* y) {
    const int64_t n = w.n_cols;
    const uint8_t* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = w.raw.data() + (r + i) * w.row_bytes;
    float32x4_t acc[R][T];
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < T; ++j) acc[i][j] = vdupq_n_f32(0.0f);
    }
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
      float32x4_t xv[T];
      for (int j = 0; j < T; ++j) xv[j] = vld1q_f32(x + (t + j) * n + k);
      for (int i = 0; i < R; ++i) {
        const float32x4_t wv = Row::load4(rows[i], k);
        for (int j = 0; j < T; ++j) acc[i][j] = vfmaq_f32(acc[i][j], wv, xv[j]);
      }
    }
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < T; ++j) {
        float sum = vaddvq_f32(acc[i][j]);
        for (int64_t kk = k; kk < n; ++kk) sum += Row::at(rows[i], kk) * x[(t + j) * n + kk];
        y[(t + j) * w.n_rows + r + i] = sum;
      }
    }
  }
};

// One row of n weights against x: four accumulators of 4 lanes (FMA latency), then the row's
// last n % 4 weights one by one.
template <class Row>
float row_dot(const uint8_t* row, const float* x, int64_t n) {
  float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    for (int j = 0; j < 4; ++j) acc[j] = vfmaq_f32(acc[j], Row::load4(row, k + 4 * j), vld1q_f32(x + k + 4 * j));
  }
  for (; k + 4 <= n; k += 4) acc[0] = vfmaq_f32(acc[0], Row::load4(row, k), vld1q_f32(x + k));
  float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
  for (; k < n; ++k) sum += Row::at(row, k) * x[k];
  return sum;
}

// Decode: rows one after the other, each against the one token (row_dot), as the AVX2 set: one
// sequential stream per thread for the prefetchers, where the tiles' R rows side by side are R
// streams of a few KB.
template <class Row>
void matmul_plain(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  if (n_tokens == 1) {
    for (int64_t r = r0; r < r1; ++r) y[r] = row_dot<Row>(w.raw.data() + r * w.row_bytes, x, w.n_cols);
    return;
  }
  matmul_tiles<PlainTiles<Row>>(w, x, n_tokens, y, r0, r1);
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) {
  return row_dot<F32Row>(reinterpret_cast<const uint8_t*>(a), b, n);
}

void matmul_float(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  switch (w.type) {
    case GgmlType::kF32: return matmul_plain<F32Row>(w, x, n_tokens, y, r0, r1);
    case GgmlType::kF16: return matmul_plain<F16Row>(w, x, n_tokens, y, r0, r1);
    case GgmlType::kBF16: return matmul_plain<BF16Row>(w, x, n_tokens, y, r0, r1);
    default:
      if (quant_act_format(w.type)) return matmul_quantized_act(w, x, n_tokens, y, r0, r1, quant_dot(w.type));
      return matmul_float_by_blocks(w, x, n_tokens, y, r0, r1, dot_f32);
  }
}

}  // namespace bitnet::cpu::neon
