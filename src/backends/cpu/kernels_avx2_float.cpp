// AVX2 set, float weights: matmul over F32/F16/BF16/Q8_0 rows read in place (the tied F16 token
// embedding as output head is the largest tensor read per decoded token), FMA into several
// accumulators; Q6_K in integers against Q8_K activations, as llama.cpp. Other formats are
// dequantized block by block. Sums run in another order than the scalar twin's, so results
// differ from it in the last bits.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_avx2.h"
#include "backends/cpu/kernels_float_driver.h"

namespace bitnet::cpu::avx2 {

namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Each unblocked format: load8(row, k) = weights k .. k+7 of a row as floats (k a multiple of
// 8), and at(row, k) = weight k, for a row's last n_cols % 8 weights.
struct F32Row {
  static __m256 load8(const uint8_t* row, int64_t k) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k); }
  static float at(const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
};

struct F16Row {
  static __m256 load8(const uint8_t* row, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
  }
  static float at(const uint8_t* row, int64_t k) { return _cvtsh_ss(load_u16(row + 2 * k)); }
};

struct BF16Row {  // bf16 is the high half of an f32
  static __m256 load8(const uint8_t* row, int64_t k) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  static float at(const uint8_t* row, int64_t k) {
    const uint32_t bits = static_cast<uint32_t>(load_u16(row + 2 * k)) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// Tiles of R rows from r x T tokens from t: each weight vector feeds T tokens, each token
// vector R rows; R * T independent accumulators hide the FMA latency.
template <class Row>
struct PlainTiles {
  template <int R, int T>
  static void tile(const CpuWeight& w, const float* x, int64_t t, int64_t r, float* y) {
    const int64_t n = w.n_cols;
    const uint8_t* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = w.raw.data() + (r + i) * w.row_bytes;
    __m256 acc[R][T];
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
      __m256 xv[T];
      for (int j = 0; j < T; ++j) xv[j] = _mm256_loadu_ps(x + (t + j) * n + k);
      for (int i = 0; i < R; ++i) {
        const __m256 wv = Row::load8(rows[i], k);
        for (int j = 0; j < T; ++j) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
      }
    }
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < T; ++j) {
        float sum = hsum(acc[i][j]);
        for (int64_t kk = k; kk < n; ++kk) sum += Row::at(rows[i], kk) * x[(t + j) * n + kk];
        y[(t + j) * w.n_rows + r + i] = sum;
      }
    }
  }
};

// Q8_0 rows (34-byte blocks of 32: fp16 d, then int8 q[32]; w = q * d): per block, sum q * x
// in float for each row and token, then acc += d * that.
struct Q8_0Tiles {
  template <int R, int T>
  static void tile(const CpuWeight& w, const float* x, int64_t t, int64_t r, float* y) {
    const int64_t n = w.n_cols;
    const uint8_t* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = w.raw.data() + (r + i) * w.row_bytes;
    __m256 acc[R][T];
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < n; k += 32) {
      for (int i = 0; i < R; ++i) {
        const uint8_t* block = rows[i] + k / 32 * 34;
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(load_u16(block)));
        __m256 wv[4];
        for (int c = 0; c < 4; ++c) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * c));
          wv[c] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
        }
        for (int j = 0; j < T; ++j) {
          const float* xb = x + (t + j) * n + k;
          __m256 dot = _mm256_mul_ps(wv[0], _mm256_loadu_ps(xb));
          for (int c = 1; c < 4; ++c) dot = _mm256_fmadd_ps(wv[c], _mm256_loadu_ps(xb + 8 * c), dot);
          acc[i][j] = _mm256_fmadd_ps(d, dot, acc[i][j]);
        }
      }
    }
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < T; ++j) y[(t + j) * w.n_rows + r + i] = hsum(acc[i][j]);
    }
  }
};

// One Q6_K row (quant/q6_k.h: ql[128] low nibbles, qh[64] high bit pairs, int8 scales[16], fp16
// d) against Q8_K activations (quant/q8_k.h), in integers as ggml_vec_dot_q6_K_q8_K: per 32
// elements the codes q in [0, 63] meet the int8 activations in vpmaddubsw (two products of at
// most 63 * 127 per int16: no saturation), vpmaddwd applies the sub-block scales, and the
// "- 32" of every code is taken once per block from the activations' 16-element sums.
float dot_q6_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  // Shuffles that spread scale bytes 2p and 2p+1 over 8 bytes each (sub-blocks 2p, 2p+1 are
  // the 32 elements of pair p = 4h + k).
  static const __m128i kPairMask[8] = {
      _mm_set_epi8(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
      _mm_set_epi8(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2),
      _mm_set_epi8(5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 4),
      _mm_set_epi8(7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 6),
      _mm_set_epi8(9, 9, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 8),
      _mm_set_epi8(11, 11, 11, 11, 11, 11, 11, 11, 10, 10, 10, 10, 10, 10, 10, 10),
      _mm_set_epi8(13, 13, 13, 13, 13, 13, 13, 13, 12, 12, 12, 12, 12, 12, 12, 12),
      _mm_set_epi8(15, 15, 15, 15, 15, 15, 15, 15, 14, 14, 14, 14, 14, 14, 14, 14)};
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i low2 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 210;
    const uint8_t* act = a + b * 292;
    float a_d;
    std::memcpy(&a_d, act, 4);
    const float d = _cvtsh_ss(load_u16(blk + 208)) * a_d;  // as ggml: fp16 d times the Q8_K d
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + 260));
    // 32 * sum_j scale_j * bsum_j, in 8 int32 lanes.
    __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                    _mm256_slli_epi32(_mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(sc8)), 5));
    const int8_t* q8 = reinterpret_cast<const int8_t*>(act + 4);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i ql[2] = {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h)),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32))};
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        // Elements 128h + 32k + l: a nibble of ql[k % 2] (low for k < 2) below bits 2k, 2k+1 of qh.
        const __m256i nibble = _mm256_and_si256(k < 2 ? ql[k % 2] : _mm256_srli_epi16(ql[k % 2], 4), low4);
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), low2);
        const __m256i q = _mm256_or_si256(nibble, _mm256_slli_epi16(high, 4));
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 128 * h + 32 * k));
        const __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, kPairMask[4 * h + k]));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), scale));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc);
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), _mm256_loadu_ps(b + i + 8 * j), acc[j]);
    }
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void matmul_float(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  switch (w.type) {
    case GgmlType::kF32: return matmul_tiles<PlainTiles<F32Row>>(w, x, n_tokens, y, r0, r1);
    case GgmlType::kF16: return matmul_tiles<PlainTiles<F16Row>>(w, x, n_tokens, y, r0, r1);
    case GgmlType::kBF16: return matmul_tiles<PlainTiles<BF16Row>>(w, x, n_tokens, y, r0, r1);
    case GgmlType::kQ8_0: return matmul_tiles<Q8_0Tiles>(w, x, n_tokens, y, r0, r1);
    case GgmlType::kQ6_K: return matmul_quantized_act(w, x, n_tokens, y, r0, r1, dot_q6_K_q8_K);
    default: return matmul_float_by_blocks(w, x, n_tokens, y, r0, r1, dot_f32);
  }
}

}  // namespace bitnet::cpu::avx2
