// AVX-512 VNNI set: the AVX2 set with a W2A8 matmul on the 512-bit vpdpbusd (unsigned codes x
// signed activations, groups of 4 products added straight into int32 lanes: no int16 stage,
// no overflow to guard). Same layout as the AVX2 kernel: in a row group of 4 rows the 32 code
// bytes of rows i and i+1 for one column group are adjacent, so one 64-byte load feeds two
// rows, each half against the same 32 activations (broadcast to both halves).
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_avx2.h"
#include "core/check.h"

namespace bitnet::cpu::avx512vnni {

namespace {

constexpr int kRows = avx2::kTernaryRows;

// {sum of a[0], ..., sum of a[3]}.
__m128i hsum4(const __m256i a[4]) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

// dot += code * q over one group of two adjacent rows (low half: row i, high half: row i+1).
// Field k of the code bytes (bits 7-6 for k = 0 ... 1-0 for k = 3) meets slice a[k].
__m512i add_group_dot(__m512i dot, const uint8_t* codes, const __m512i a[4]) {
  const __m512i v = _mm512_loadu_si512(codes);
  const __m512i mask = _mm512_set1_epi8(3);
  dot = _mm512_dpbusd_epi32(dot, _mm512_and_si512(_mm512_srli_epi16(v, 6), mask), a[0]);
  dot = _mm512_dpbusd_epi32(dot, _mm512_and_si512(_mm512_srli_epi16(v, 4), mask), a[1]);
  dot = _mm512_dpbusd_epi32(dot, _mm512_and_si512(_mm512_srli_epi16(v, 2), mask), a[2]);
  return _mm512_dpbusd_epi32(dot, _mm512_and_si512(v, mask), a[3]);
}

// Token t, the 4 rows of row group rg; the float update as the scalar twin, lane by lane.
__m128 row_group(const CpuWeight& w, const Q8Rows& x, int64_t t, int64_t rg) {
  const int64_t n_groups = w.n_cols / kGroupCols;
  const int64_t block_groups = w.ternary.scale_block / kGroupCols;
  const int64_t n_blocks = n_groups / block_groups;
  const int8_t* q = x.q + t * w.n_cols;
  const uint8_t* codes = w.ternary.packed.data() + rg * n_groups * kRows * kGroupBytes;
  const float* scales = w.ternary.scales.data() + rg * n_blocks * kRows;
  const __m128 s = _mm_set1_ps(x.scale[t]);
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m512i dot01 = _mm512_setzero_si512();
    __m512i dot23 = _mm512_setzero_si512();
    for (int64_t g = b * block_groups; g < (b + 1) * block_groups; ++g) {
      __m512i a[4];
      for (int k = 0; k < 4; ++k) {
        a[k] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + g * kGroupCols + 32 * k)));
      }
      const uint8_t* group = codes + g * kRows * kGroupBytes;
      dot01 = add_group_dot(dot01, group, a);
      dot23 = add_group_dot(dot23, group + 2 * kGroupBytes, a);
    }
    const __m256i dot[kRows] = {_mm512_castsi512_si256(dot01), _mm512_extracti64x4_epi64(dot01, 1),
                                _mm512_castsi512_si256(dot23), _mm512_extracti64x4_epi64(dot23, 1)};
    const __m128i act_sum = _mm_set1_epi32(x.block_sum(t, b * block_groups, (b + 1) * block_groups));
    const __m128 d = _mm_cvtepi32_ps(_mm_sub_epi32(hsum4(dot), act_sum));
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm_div_ps(d, s), _mm_loadu_ps(scales + b * kRows)));
  }
  return acc;
}

}  // namespace

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  BITNET_CHECK(w.ternary.rows_per_group == kRows);
  for (int64_t t = 0; t < x.n_tokens; ++t) {
    for (int64_t rg = r0 / kRows; rg * kRows < r1; ++rg) {
      alignas(16) float out[kRows];
      _mm_store_ps(out, row_group(w, x, t, rg));
      for (int64_t r = std::max(r0, rg * kRows); r < std::min(r1, (rg + 1) * kRows); ++r) {
        y[t * w.n_rows + r] = out[r % kRows];
      }
    }
  }
}

}  // namespace bitnet::cpu::avx512vnni

namespace bitnet::cpu {

namespace {
constexpr std::string_view kAvx512VnniNeeds[] = {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                                                 "avx512_vnni"};
}

constinit const KernelSet kAvx512VnniKernels = {
    .name = "avx512vnni",
    .needs = kAvx512VnniNeeds,
    .ternary_rows_per_group = avx2::kTernaryRows,
    .matmul_ternary = avx512vnni::matmul_ternary,
    .matmul_float = avx2::matmul_float,
    .quantize_act = avx2::quantize_act,
    .rms_norm_row = avx2::rms_norm_row,
    .rope_row = rope_row,
    .attention_head = avx2::attention_head,
    .silu_mul = avx2::silu_mul,
    .relu2_mul = avx2::relu2_mul,
    .add = avx2::add,
};

}  // namespace bitnet::cpu
