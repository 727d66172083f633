// Q6_K in lane order (q6_K_lanes.h): the repacked blocks dequantize to the same values, and a
// set's lane-order row dot and tile (KernelSet::q6_K_lanes_dot/_tile) on repacked weights and
// activations equal its row dot on the file's order bit for bit.
#include "backends/cpu/q6_K_lanes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>
#include <vector>

#include "backends/cpu/kernel_test_util.h"
#include "core/cpu_features.h"
#include "quant/q6_k.h"
#include "quant/q8_k.h"
#include "quant/quant.h"

namespace bitnet::cpu {
namespace {

constexpr int64_t kBlockBytes = 210;

std::vector<uint8_t> quantized(GgmlType type, const std::vector<float>& x) {
  auto q = quant::quantize(type, x.data(), 1, static_cast<int64_t>(x.size()));
  EXPECT_TRUE(q.ok()) << q.status().to_string();
  return q.ok() ? std::move(*q) : std::vector<uint8_t>{};
}

std::vector<uint8_t> to_lanes(const std::vector<uint8_t>& w) {
  std::vector<uint8_t> out(w.size());
  for (size_t b = 0; b < w.size() / kBlockBytes; ++b) q6_K_block_to_lanes(w.data() + b * kBlockBytes, out.data() + b * kBlockBytes);
  return out;
}

std::vector<uint8_t> act_to_lanes(std::vector<uint8_t> a) {
  for (size_t b = 0; b < a.size() / quant::kQ8_KBlockBytes; ++b) q8_K_block_to_lanes(a.data() + b * quant::kQ8_KBlockBytes);
  return a;
}

TEST(Q6_KLanes, ThePermutationVisitsEveryElementOnce) {
  std::vector<int> seen(256, 0);
  for (int pos = 0; pos < 256; ++pos) ++seen[static_cast<size_t>(q6_K_lane_element(pos))];
  for (int e = 0; e < 256; ++e) EXPECT_EQ(seen[static_cast<size_t>(e)], 1) << e;
  // Lane p (4 bytes) of each of the 4 vectors of 64 positions is in sub-block p.
  for (int pos = 0; pos < 256; ++pos) EXPECT_EQ(q6_K_lane_element(pos) / 16, pos % 64 / 4) << pos;
}

TEST(Q6_KLanes, RepackedRowsDequantizeToTheSameValues) {
  std::mt19937 rng(5);
  const int64_t n = 1024;
  const auto w = quantized(GgmlType::kQ6_K, test::random_floats(n, rng));
  std::vector<float> want(n), got(n);
  ASSERT_TRUE(quant::dequantize(GgmlType::kQ6_K, w, n, want.data()).ok());
  const auto lanes = to_lanes(w);
  EXPECT_NE(lanes, w);
  dequantize_q6_K_lanes_row(lanes.data(), n, got.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << i;
}

// 1000 blocks of random bytes, their scalar conversion, and an output buffer with a canary
// past the blocks.
struct ConversionCase {
  static constexpr int64_t kBlocks = 1000;
  static constexpr size_t kTail = 64;
  std::vector<uint8_t> w, want, got;
  ConversionCase() : w(static_cast<size_t>(kBlocks * kBlockBytes)) {
    std::mt19937 rng(5);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    want = to_lanes(w);
    got.assign(w.size() + kTail, 0xAA);
  }
  void check(const char* what) const {
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin())) << what;
    EXPECT_TRUE(std::all_of(got.begin() + static_cast<std::ptrdiff_t>(want.size()), got.end(),
                            [](uint8_t b) { return b == 0xAA; }))
        << what << " wrote past the last block";
  }
};

// The load-time entry point (the vector conversion where the CPU has AVX-512 F and BW, else
// the scalar one) writes the scalar conversion's bytes, and nothing past them.
TEST(Q6_KLanes, BlocksToLanesEqualsBlockByBlock) {
  ConversionCase c;
  q6_K_blocks_to_lanes(c.w.data(), c.got.data(), ConversionCase::kBlocks);
  c.check("q6_K_blocks_to_lanes");
}

// The AVX-512 conversion itself, where the CPU can run it.
TEST(Q6_KLanes, VectorConversionEqualsTheScalarOne) {
#if defined(__x86_64__)
  const CpuFeatures f = detect_cpu_features();
  if (!f.avx512f || !f.avx512bw) GTEST_SKIP() << "no AVX-512 F and BW on this CPU: the vector conversion not run";
  ConversionCase c;
  q6_K_blocks_to_lanes_avx512(c.w.data(), c.got.data(), ConversionCase::kBlocks);
  c.check("q6_K_blocks_to_lanes_avx512");
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

TEST(Q6_KLanes, PlanesHoldSixBitsAndAPairOfTheFourthVector) {
  std::mt19937 rng(11);
  constexpr int kBlocks = 16;
  const auto w = quantized(GgmlType::kQ6_K, test::random_floats(256 * kBlocks, rng));
  const auto lanes = to_lanes(w);
  int high_bits_set = 0;
  for (int blk = 0; blk < kBlocks; ++blk) {
    const uint8_t* file = w.data() + blk * kBlockBytes;
    const uint8_t* lane = lanes.data() + blk * kBlockBytes;
    uint8_t codes[256];
    quant::q6_K_codes(file, codes);  // by element
    const auto code_at = [&](int pos) { return codes[q6_K_lane_element(pos)]; };
    for (int j = 0; j < 3; ++j) {
      for (int x = 0; x < 64; ++x) {
        const uint8_t b = lane[64 * j + x];
        EXPECT_EQ(b & 63, code_at(64 * j + x)) << "block " << blk << " plane " << j << " byte " << x;
        EXPECT_EQ(b >> 6, code_at(192 + x) >> (2 * j) & 3) << "block " << blk << " plane " << j << " byte " << x;
        high_bits_set += b >> 6 != 0;
      }
    }
    EXPECT_TRUE(std::equal(lane + 192, lane + kBlockBytes, file + 192));  // scales, d
  }
  EXPECT_GT(high_bits_set, 0);
}

class Q6_KLanesDot : public test::EverySet {};

TEST_P(Q6_KLanesDot, EqualsTheFileOrderDotBitForBit) {
  if (set().q6_K_lanes_dot == nullptr) GTEST_SKIP() << set().name << " reads Q6_K in the file's order only";
  std::mt19937 rng(7);
  constexpr int kRows = 3;
  for (int64_t n : {256, 768, 2560}) {
    for (int kind = 0; kind < 4; ++kind) {
      SCOPED_TRACE("n=" + std::to_string(n) + " kind " + std::to_string(kind));
      std::vector<uint8_t> w;
      for (int r = 0; r < kRows; ++r) {
        std::vector<float> x = test::random_floats(n, rng);
        if (kind == 1) std::fill(x.begin(), x.end(), 3.0f);  // codes at their top
        if (kind == 2) {
          for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = (i % 2 == 0 ? 1.0f : -1.0f) * (i % 7 == 0 ? 4.0f : 1.0f);
        }
        if (kind == 3) {  // each sub-block's first value sets the scale: the others take code 63
          for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = i % 16 == 0 ? -4.0f : 4.0f;
        }
        const auto row = quantized(GgmlType::kQ6_K, x);
        if (kind == 3) {
          ASSERT_EQ(quant::q6_K_code(row.data(), 1), 63);
        }
        w.insert(w.end(), row.begin(), row.end());
      }
      const int64_t w_row_bytes = static_cast<int64_t>(w.size()) / kRows;
      const auto w_lanes = to_lanes(w);
      std::vector<uint8_t> act;
      for (int j = 0; j < kQuantTileTokens; ++j) {
        std::vector<float> x = test::random_floats(n, rng);
        if (kind == 2) {
          for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = i % 3 == 0 ? -8.0f : 8.0f;  // +-127
        }
        if (kind == 3) std::fill(x.begin(), x.end(), 8.0f);  // every quant -127 (Q8_K stays within +-127)
        const auto a = quantized(GgmlType::kQ8_K, x);
        if (kind == 3) {
          ASSERT_EQ(quant::q8_K_qs(a.data())[0], -127);
        }
        act.insert(act.end(), a.begin(), a.end());
      }
      const int64_t act_row_bytes = static_cast<int64_t>(act.size()) / kQuantTileTokens;
      const auto act_lanes = act_to_lanes(act);
      const QuantDotFn dot = set().quant_dot(GgmlType::kQ6_K);
      const QuantDotFn lanes_dot = set().q6_K_lanes_dot();
      for (int r = 0; r < kRows; ++r) {
        for (int j = 0; j < kQuantTileTokens; ++j) {
          const float want = dot(n, w.data() + r * w_row_bytes, act.data() + j * act_row_bytes);
          const float got = lanes_dot(n, w_lanes.data() + r * w_row_bytes, act_lanes.data() + j * act_row_bytes);
          EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "row " << r << " token " << j;
        }
      }
      ASSERT_NE(set().q6_K_lanes_tile, nullptr);
      for (int n_act = 1; n_act <= kQuantTileTokens; ++n_act) {
        float out[kRows * kQuantTileTokens] = {};
        set().q6_K_lanes_tile()(n, w_lanes.data(), w_row_bytes, kRows, act_lanes.data(), act_row_bytes, n_act, out, kRows);
        for (int r = 0; r < kRows; ++r) {
          for (int j = 0; j < n_act; ++j) {
            const float want = dot(n, w.data() + r * w_row_bytes, act.data() + j * act_row_bytes);
            EXPECT_EQ(std::bit_cast<uint32_t>(out[j * kRows + r]), std::bit_cast<uint32_t>(want))
                << "tile of " << n_act << ": row " << r << " token " << j;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sets, Q6_KLanesDot, testing::ValuesIn(test::set_names()), test::set_param_name);

}  // namespace
}  // namespace bitnet::cpu
