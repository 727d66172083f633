// The tensor-core GEMM's fragment layouts and its host twin (mma_math.h): the layouts cover
// each element of A, B and C exactly once, and the twin of the whole kernel (fragments filled
// from W2C weights and int8 rows as the kernel fills them, int32 sums per scale block, the
// epilogue in block order) is bit-identical to the CPU's matmul_ternary.
#include "backends/cuda/mma_math.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backends/cpu/kernel_test_util.h"
#include "backends/cuda/w2c_weights.h"
#include "quant/quant.h"

namespace bitnet::cuda {
namespace {

TEST(CudaMmaMath, FragmentLayoutsCoverEveryElementOnce) {
  int a[16][32] = {}, b[32][8] = {}, c[16][8] = {};
  for (int lane = 0; lane < kWarp; ++lane) {
    for (int i = 0; i < 4; ++i) {
      for (int byte = 0; byte < 4; ++byte) ++a[mma_a_row(lane, i)][mma_a_col(lane, i) + byte];
      ++c[mma_c_row(lane, i)][mma_c_col(lane, i)];
    }
    for (int i = 0; i < 2; ++i) {
      for (int byte = 0; byte < 4; ++byte) ++b[mma_b_k(lane, i) + byte][mma_b_n(lane)];
    }
  }
  for (auto& row : a) for (int v : row) ASSERT_EQ(v, 1);
  for (auto& row : b) for (int v : row) ASSERT_EQ(v, 1);
  for (auto& row : c) for (int v : row) ASSERT_EQ(v, 1);
}

// The mma without the instruction (HIP; w2a8_mma.cu's mma_s8 on a device without it), every
// lane run with the fragments of all 32 lanes as its shuffles would see them: the same C as
// the instruction's twin, for random fragments over the whole int8 range and a non-zero C.
TEST(CudaMmaMath, LaneFallbackEqualsTheTwin) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (int trial = 0; trial < 50; ++trial) {
    int32_t a[kWarp][4], b[kWarp][2], c_twin[kWarp][4], c_lanes[kWarp][4];
    for (int lane = 0; lane < kWarp; ++lane) {
      for (int i = 0; i < 4; ++i) {
        a[lane][i] = static_cast<int32_t>(bits(rng));
        c_twin[lane][i] = c_lanes[lane][i] = static_cast<int32_t>(bits(rng) % 100001) - 50000;
      }
      for (int i = 0; i < 2; ++i) b[lane][i] = static_cast<int32_t>(bits(rng));
    }
    if (trial == 0) {  // the extremes: -128 * -128 in every product
      for (auto& f : a) for (auto& v : f) v = static_cast<int32_t>(0x80808080u);
      for (auto& f : b) for (auto& v : f) v = static_cast<int32_t>(0x80808080u);
    }
    mma_m16n8k32_twin(a, b, c_twin);
    for (int lane = 0; lane < kWarp; ++lane) {
      mma_m16n8k32_lanes(
          lane, [&](int src, int i) { return a[src][i]; }, [&](int src, int i) { return b[src][i]; }, c_lanes[lane]);
    }
    for (int lane = 0; lane < kWarp; ++lane) {
      for (int i = 0; i < 4; ++i) ASSERT_EQ(c_lanes[lane][i], c_twin[lane][i]) << "trial " << trial << " lane " << lane << " reg " << i;
    }
  }
}

TEST(CudaMmaMath, KernelTwinIsBitExactWithTheCpu) {
  std::mt19937 rng(21);
  struct Case {
    GgmlType type;
    int64_t n_rows, n_cols, n_tokens;
    bool per_block;
  };
  // Odd row and token counts (partial 16-row and 8-token tiles), per-row and per-block scales.
  for (const Case k : {Case{GgmlType::kI2_S, 37, 256, 13, false}, Case{GgmlType::kI2_S, 16, 2560, 8, false},
                       Case{GgmlType::kTQ2_0, 21, 768, 9, true}, Case{GgmlType::kTQ1_0, 40, 2304, 3, true},
                       Case{GgmlType::kTQ2_0, 5, 6912, 17, false}}) {
    const int64_t n = k.n_rows * k.n_cols;
    auto scales = cpu::test::random_scales(k.type, n, rng);
    if (!k.per_block) std::fill(scales.begin(), scales.end(), scales[0]);
    else scales[1] += 0.0078125f;
    const auto f = cpu::test::ternary_file(k.type, cpu::test::random_codes(n, rng), scales, k.n_cols, k.n_rows);
    auto w = repack_w2c(k.type, f.bytes, k.n_cols, k.n_rows);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    ASSERT_EQ(w->scale_block == k.n_cols, !k.per_block);

    std::vector<int8_t> q(static_cast<size_t>(k.n_tokens * k.n_cols));
    std::vector<float> s(static_cast<size_t>(k.n_tokens));
    std::vector<int32_t> sums(static_cast<size_t>(k.n_tokens * k.n_cols / kChunkCols));
    const auto x = cpu::test::random_floats(k.n_tokens * k.n_cols, rng);
    for (int64_t t = 0; t < k.n_tokens; ++t) {
      s[static_cast<size_t>(t)] = act_quant_row_twin(x.data() + t * k.n_cols, k.n_cols, q.data() + t * k.n_cols,
                                                     sums.data() + t * k.n_cols / kChunkCols);
    }
    std::vector<float> got(static_cast<size_t>(k.n_tokens * k.n_rows), -1.0f);
    w2a8_mma_twin(w->words.data(), w->scales.data(), k.n_rows, k.n_cols, w->scale_block, q.data(), s.data(),
                  sums.data(), k.n_tokens, got.data());

    const cpu::CpuWeight cw = cpu::test::prepare(f, 1);
    const cpu::test::TestQ8 xq(q, s, k.n_tokens, k.n_cols);
    std::vector<float> want(got.size());
    cpu::kScalarKernels.matmul_ternary(cw, xq.rows(), want.data(), 0, k.n_rows);
    ASSERT_EQ(got, want) << ggml_type_name(k.type) << " " << k.n_rows << "x" << k.n_cols << " tokens " << k.n_tokens;
  }
}

}  // namespace
}  // namespace bitnet::cuda
