// The CPU kernels against straightforward double-precision references.
#include "backends/cpu/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/fp16.h"
#include "quant/act_quant.h"
#include "quant/quant.h"

namespace bitnet::cpu {
namespace {

std::vector<uint8_t> random_codes(int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> c(static_cast<size_t>(n));
  for (auto& x : c) x = static_cast<uint8_t>(rng() % 3);
  return c;
}

std::vector<float> random_floats(int64_t n, std::mt19937& rng, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// Builds a ternary CpuWeight through the real file formats and prepare_weight.
CpuWeight ternary_weight(GgmlType type, const std::vector<uint8_t>& codes, const std::vector<float>& scales,
                         int64_t n_cols, int64_t n_rows, std::vector<uint8_t>& storage) {
  auto bytes = quant::ternary_encode(type, codes.data(), scales.data(), n_cols * n_rows);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  storage = std::move(*bytes);
  hal::WeightDesc d{"w", type, {n_cols, n_rows, 1, 1}, storage};
  auto w = prepare_weight(d);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  return std::move(*w);
}

TEST(CpuWeights, RepackedCodesAreTheI2SCodeBytes) {
  std::mt19937 rng(1);
  const int64_t n_cols = 256, n_rows = 3;
  const auto codes = random_codes(n_cols * n_rows, rng);
  std::vector<uint8_t> packed(static_cast<size_t>(n_cols * n_rows / 4));
  pack_ternary_rows(codes.data(), n_rows, n_cols, packed.data());
  const float scale = 0.5f;
  auto i2s = quant::ternary_encode(GgmlType::kI2_S, codes.data(), &scale, n_cols * n_rows);
  ASSERT_TRUE(i2s.ok());
  EXPECT_EQ(0, std::memcmp(packed.data(), i2s->data(), packed.size()));
}

class TernaryMatmul : public testing::TestWithParam<GgmlType> {};

TEST_P(TernaryMatmul, MatchesDoubleReference) {
  const GgmlType type = GetParam();
  std::mt19937 rng(2);
  const int64_t n_cols = 512, n_rows = 37, n_tokens = 3;
  const auto codes = random_codes(n_cols * n_rows, rng);
  const int64_t block = quant::ternary_scale_block(type, n_cols * n_rows);
  std::vector<float> scales(static_cast<size_t>(n_cols * n_rows / block));
  for (auto& s : scales) s = fp16_to_fp32(fp32_to_fp16(0.01f + static_cast<float>(rng() % 100) / 1000.0f));
  std::vector<uint8_t> storage;
  const CpuWeight w = ternary_weight(type, codes, scales, n_cols, n_rows, storage);

  const auto x = random_floats(n_cols * n_tokens, rng);
  std::vector<int8_t> q(x.size());
  std::vector<float> s(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) {
    int32_t sum = 0;
    s[static_cast<size_t>(t)] = quant::act_quant_i8(x.data() + t * n_cols, n_cols, q.data() + t * n_cols, &sum);
  }
  std::vector<float> y(static_cast<size_t>(n_rows * n_tokens));
  matmul_ternary(w, q.data(), s.data(), n_tokens, y.data(), 0, n_rows);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      double ref = 0.0;
      for (int64_t k = 0; k < n_cols; ++k) {
        const int64_t i = r * n_cols + k;
        ref += (codes[static_cast<size_t>(i)] - 1.0) * q[static_cast<size_t>(t * n_cols + k)] *
               scales[static_cast<size_t>(i / block)];
      }
      ref /= s[static_cast<size_t>(t)];
      EXPECT_NEAR(y[static_cast<size_t>(t * n_rows + r)], ref, 1e-4 * (1.0 + std::abs(ref))) << "row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, TernaryMatmul,
                         testing::Values(GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0));

class FloatMatmul : public testing::TestWithParam<GgmlType> {};

TEST_P(FloatMatmul, MatchesDoubleReferenceOfDequantizedWeights) {
  const GgmlType type = GetParam();
  std::mt19937 rng(3);
  const int64_t n_cols = 96, n_rows = 21, n_tokens = 2;
  const auto wf = random_floats(n_cols * n_rows, rng);
  auto bytes = quant::quantize(type, wf.data(), n_rows, n_cols);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  hal::WeightDesc d{"w", type, {n_cols, n_rows, 1, 1}, *bytes};
  auto w = prepare_weight(d);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  std::vector<float> deq(wf.size());
  ASSERT_TRUE(quant::dequantize(type, *bytes, n_cols * n_rows, deq.data()).ok());
  const auto x = random_floats(n_cols * n_tokens, rng);
  std::vector<float> y(static_cast<size_t>(n_rows * n_tokens));
  matmul_float(*w, x.data(), n_tokens, y.data(), 0, n_rows);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      double ref = 0.0;
      for (int64_t k = 0; k < n_cols; ++k) ref += static_cast<double>(deq[static_cast<size_t>(r * n_cols + k)]) * x[static_cast<size_t>(t * n_cols + k)];
      EXPECT_NEAR(y[static_cast<size_t>(t * n_rows + r)], ref, 1e-4 * (1.0 + std::abs(ref)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, FloatMatmul,
                         testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0));

TEST(CpuKernels, RmsNorm) {
  const std::vector<float> x = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<float> g = {1.0f, 2.0f, 0.5f, -1.0f};
  std::vector<float> y(4);
  rms_norm_row(x.data(), g.data(), 4, 1e-5f, y.data());
  double ms = 0;
  for (float v : x) ms += v * v;
  const double inv = 1.0 / std::sqrt(ms / 4 + 1e-5);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], x[i] * inv * g[i], 1e-6);
}

void rope_reference(std::vector<double>& v, int head_dim, int n_rot, int64_t pos, double base, bool neox) {
  for (int i = 0; i < n_rot / 2; ++i) {
    const double theta = static_cast<double>(pos) * std::pow(base, -2.0 * i / n_rot);
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + n_rot / 2 : 2 * i + 1;
    const double x0 = v[static_cast<size_t>(a)], x1 = v[static_cast<size_t>(b)];
    v[static_cast<size_t>(a)] = x0 * std::cos(theta) - x1 * std::sin(theta);
    v[static_cast<size_t>(b)] = x0 * std::sin(theta) + x1 * std::cos(theta);
  }
  (void)head_dim;
}

TEST(CpuKernels, RopeNormAndNeox) {
  std::mt19937 rng(4);
  const int head_dim = 16, n_head = 2;
  for (bool neox : {false, true}) {
    for (int n_rot : {16, 8}) {
      for (int64_t pos : {0, 1, 17, 300}) {
        auto x = random_floats(head_dim * n_head, rng);
        hal::RopeParams p{neox ? hal::RopeStyle::kNeox : hal::RopeStyle::kNorm, n_rot, 10000.0f, 1.0f};
        std::vector<float> y = x;
        rope_row(y.data(), n_head, head_dim, pos, p);
        for (int h = 0; h < n_head; ++h) {
          std::vector<double> ref(x.begin() + h * head_dim, x.begin() + (h + 1) * head_dim);
          rope_reference(ref, head_dim, n_rot, pos, 10000.0, neox);
          for (int i = 0; i < head_dim; ++i) {
            EXPECT_NEAR(y[static_cast<size_t>(h * head_dim + i)], ref[static_cast<size_t>(i)], 1e-3)
                << (neox ? "neox" : "norm") << " n_rot " << n_rot << " pos " << pos << " i " << i;
          }
        }
      }
    }
  }
}

TEST(CpuKernels, AttentionHeadIsSoftmaxWeightedSum) {
  std::mt19937 rng(5);
  const int head_dim = 8;
  const int64_t n_pos = 5, n_embd_kv = 16, kv_off = 8;
  const auto q = random_floats(head_dim, rng);
  const auto k = random_floats(n_pos * n_embd_kv, rng);
  const auto v = random_floats(n_pos * n_embd_kv, rng);
  std::vector<float> scores(n_pos), out(head_dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  attention_head(q.data(), k.data(), v.data(), n_pos, n_embd_kv, kv_off, head_dim, scale, scores.data(), out.data());
  std::vector<double> w(n_pos);
  double sum = 0;
  for (int64_t j = 0; j < n_pos; ++j) {
    double d = 0;
    for (int i = 0; i < head_dim; ++i) d += q[static_cast<size_t>(i)] * k[static_cast<size_t>(j * n_embd_kv + kv_off + i)];
    w[static_cast<size_t>(j)] = std::exp(d * scale);
    sum += w[static_cast<size_t>(j)];
  }
  for (int i = 0; i < head_dim; ++i) {
    double ref = 0;
    for (int64_t j = 0; j < n_pos; ++j) ref += w[static_cast<size_t>(j)] / sum * v[static_cast<size_t>(j * n_embd_kv + kv_off + i)];
    EXPECT_NEAR(out[static_cast<size_t>(i)], ref, 1e-5);
  }
}

TEST(CpuKernels, GatedActivations) {
  const std::vector<float> a = {-2.0f, -0.5f, 0.0f, 1.5f};
  const std::vector<float> b = {1.0f, 2.0f, 3.0f, -1.0f};
  std::vector<float> y(4);
  relu2_mul(a.data(), b.data(), 4, y.data());
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.0f, 0.0f, -2.25f}));
  silu_mul(a.data(), b.data(), 4, y.data());
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], a[i] / (1 + std::exp(-a[i])) * b[i], 1e-6);
}

}  // namespace
}  // namespace bitnet::cpu
