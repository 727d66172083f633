// AVX2 set, float weights: matmul over F32/F16/BF16 rows read in place (the tied F16 token
// embedding as output head is the largest tensor read per decoded token), FMA into several
// accumulators; the types llama.cpp dots against quantized activations go to quant_dot
// (kernels_avx2_qdot.cpp). Other formats are dequantized block by block. Sums run in another
// order than the scalar twin's, so results differ from it in the last bits.
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
  static constexpr int64_t kBytes = 4;  // per weight
  static __m256 load8(const uint8_t* row, int64_t k) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k); }
  static float at(const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
};

struct F16Row {
  static constexpr int64_t kBytes = 2;
  static __m256 load8(const uint8_t* row, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
  }
  static float at(const uint8_t* row, int64_t k) { return _cvtsh_ss(load_u16(row + 2 * k)); }
};

struct BF16Row {  // bf16 is the high half of an f32
  static constexpr int64_t kBytes = 2;
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

// How far ahead decode's row dot prefetches its weights (the rows of a call follow one another
// in memory, so this runs on into the next rows): the hardware prefetchers alone left each core
// short of the bandwidth on Zen 5, as for the Q6_K head (kernels_x86_qdot_common.h).
// bench_cpu_kernels gemv_f16 32000x2560, 2 threads: 62 -> 79 GB/s; 2B-4T decode with its F16
// head, with and without, alternating token by token in one process: 0.84-0.90 of the time on
// 2 threads, 0.88-0.91 on one; 8 KB against 16 KB 0.98-1.00.
constexpr int64_t kRowPrefetchBytesF = 8192;

// One row of n weights against x[n]: four accumulators of 8 lanes over 32 weights at a time;
// kStream: the row is one of a weight's (decode), so the rows after it are prefetched as it goes.
template <class Row, bool kStream>
float row_dot(const uint8_t* row, const float* x, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    for (int64_t l = 0; kStream && l < 32 * Row::kBytes; l += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(row + Row::kBytes * k + kRowPrefetchBytesF + l), _MM_HINT_T0);
    }
    for (int j = 0; j < 4; ++j) acc[j] = _mm256_fmadd_ps(Row::load8(row, k + 8 * j), _mm256_loadu_ps(x + k + 8 * j), acc[j]);
  }
  for (; k + 8 <= n; k += 8) acc[0] = _mm256_fmadd_ps(Row::load8(row, k), _mm256_loadu_ps(x + k), acc[0]);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; k < n; ++k) sum += Row::at(row, k) * x[k];
  return sum;
}

// Decode: rows one after the other, each against the one token (row_dot). The rows of a tensor
// are adjacent, so each thread reads one sequential stream, which the hardware prefetchers
// follow at full bandwidth (8 rows side by side are 8 streams of a few KB).
template <class Row>
void gemv_rows(const CpuWeight& w, const float* x, float* y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) y[r] = row_dot<Row, true>(w.raw.data() + r * w.row_bytes, x, w.n_cols);
}

template <class Row>
void matmul_plain(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  if (n_tokens == 1) return gemv_rows<Row>(w, x, y, r0, r1);
  matmul_tiles<PlainTiles<Row>>(w, x, n_tokens, y, r0, r1);
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) {
  return row_dot<F32Row, false>(reinterpret_cast<const uint8_t*>(a), b, n);
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

}  // namespace bitnet::cpu::avx2
