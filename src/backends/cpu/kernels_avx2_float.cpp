// AVX2 set, float weights: matmul over F32/F16/BF16/Q8_0/Q6_K rows read in place (the tied F16
// token embedding as output head is the largest tensor read per decoded token), FMA into
// several accumulators. Other formats are dequantized block by block. Sums run in another
// order than the scalar twin's, so results differ from it in the last bits.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_avx2.h"

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

// Q6_K rows (210-byte blocks of 256, quant/q6_k.h: ql[128] low nibbles, qh[64] high bit
// pairs, int8 scales[16], fp16 d; w = (d * scale[e / 16]) * (q - 32)). Codes are unpacked 32
// at a time in registers and dotted with every token.
struct Q6_KTiles {
  // The 32 codes q - 32 of elements 128h + 32k + l (l < 32) of a block: a nibble of
  // ql[64h + l] (k = 0, 2) or ql[64h + 32 + l] (k = 1, 3), the low one for k < 2, below bits
  // 2k..2k+1 of qh[32h + l].
  static __m256i codes(const uint8_t* block, int h, int k) {
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * h + 32 * (k % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 128 + 32 * h));
    const __m256i nibble = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0f));
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), _mm256_set1_epi8(3));
    return _mm256_sub_epi8(_mm256_or_si256(nibble, _mm256_slli_epi16(high, 4)), _mm256_set1_epi8(32));
  }

  template <int R, int T>
  static void tile(const CpuWeight& w, const float* x, int64_t t, int64_t r, float* y) {
    const int64_t n = w.n_cols;
    __m256 acc[R][T];
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
    }
    for (int64_t k0 = 0; k0 < n; k0 += 256) {
      for (int i = 0; i < R; ++i) {
        const uint8_t* block = w.raw.data() + (r + i) * w.row_bytes + k0 / 256 * 210;
        // The hardware prefetchers lose these 8 streams of 210-byte blocks read out of order.
        for (int line = 0; line < 4; ++line) _mm_prefetch(reinterpret_cast<const char*>(block + 2 * 210 + 64 * line), _MM_HINT_T0);
        // d * scale[s] for s = 0..7 and 8..15, as d * float(scale) in the scalar twin.
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(load_u16(block + 208)));
        const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192));
        const __m256 scales[2] = {_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))),
                                  _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))))};
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const __m256i q = codes(block, h, k);
            const __m128i halves[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
#pragma GCC unroll 4
            for (int m = 0; m < 4; ++m) {  // 8 codes each; a scale per 16
              const __m128i q8 = m % 2 == 0 ? halves[m / 2] : _mm_srli_si128(halves[m / 2], 8);
              const int e = 128 * h + 32 * k + 8 * m;
              const __m256 scale = _mm256_permutevar8x32_ps(scales[e / 128], _mm256_set1_epi32(e / 16 % 8));
              const __m256 wv = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)));
              for (int j = 0; j < T; ++j) acc[i][j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (t + j) * n + k0 + e), acc[i][j]);
            }
          }
        }
      }
    }
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < T; ++j) y[(t + j) * w.n_rows + r + i] = hsum(acc[i][j]);
    }
  }
};

template <class Tiles, int R, int T>
void tile_rows(const CpuWeight& w, const float* x, int64_t t, float* y, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + R <= r1; r += R) Tiles::template tile<R, T>(w, x, t, r, y);
  for (; r < r1; ++r) Tiles::template tile<1, T>(w, x, t, r, y);
}

// Decode streams 8 rows at once; prefill takes tiles of 4 rows x 2 tokens.
template <class Tiles>
void matmul_tiles(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  int64_t t = 0;
  for (; t + 2 <= n_tokens; t += 2) tile_rows<Tiles, 4, 2>(w, x, t, y, r0, r1);
  if (t < n_tokens) tile_rows<Tiles, 8, 1>(w, x, t, y, r0, r1);
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
    case GgmlType::kQ6_K: return matmul_tiles<Q6_KTiles>(w, x, n_tokens, y, r0, r1);
    default: return matmul_float_by_blocks(w, x, n_tokens, y, r0, r1, dot_f32);
  }
}

}  // namespace bitnet::cpu::avx2
