// Real data: llama.cpp's Q4_1 file of SmolLM2-135M-Instruct (../shared/models), whose linear
// weights are Q4_1 and whose embedding is Q8_0. Skipped when the file is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/q4_q5.h"
#include "quant/quant.h"
#include "quant/test_util.h"

namespace bitnet::quant {
namespace {

const std::string kModel =
    std::string(BITNET_SHARED_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

class SmolLm2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "missing " << kModel;
    auto f = gguf::File::open(kModel);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    file_.emplace(std::move(f).value());
  }

  const gguf::TensorInfo& tensor(const std::string& name) {
    const gguf::TensorInfo* t = file_->find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    return *t;
  }

  std::optional<gguf::File> file_;
};

std::span<const uint8_t> bytes_of(const gguf::TensorInfo& t) { return {t.data, t.n_bytes}; }

TEST_F(SmolLm2, AttnQDequantizesToPlausibleWeights) {
  const gguf::TensorInfo& t = tensor("blk.0.attn_q.weight");
  ASSERT_EQ(t.type, GgmlType::kQ4_1);
  ASSERT_EQ(t.ne[0], 576);
  ASSERT_EQ(t.ne[1], 576);
  const std::vector<float> y = testing::dequantized(t.type, bytes_of(t), t.n_elems());
  double sum_sq = 0.0;
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_TRUE(std::isfinite(y[i])) << i;
    ASSERT_LT(std::fabs(y[i]), 10.0f) << i;
    sum_sq += static_cast<double>(y[i]) * y[i];
  }
  const double rms = std::sqrt(sum_sq / static_cast<double>(y.size()));
  EXPECT_GT(rms, 0.01);  // trained weights, not zeros
  EXPECT_LT(rms, 1.0);
}

// Why re-quantizing reproduces the file: ggml's Q4_1 quantizer maps the block minimum to code 0
// and the maximum to code 15 (clamped), so every block with d != 0 holds both codes, and its
// dequantized min and max are m and 15 d + m again.
TEST_F(SmolLm2, Q4_1BlocksSpanCodes0To15) {
  const gguf::TensorInfo& t = tensor("blk.0.attn_q.weight");
  int64_t spanning = 0;
  for (int64_t b = 0; b < t.n_elems() / 32; ++b) {
    const uint8_t* block = t.data + b * kQ4_1BlockBytes;
    if (block[0] == 0 && block[1] == 0) continue;  // d = 0: a constant block
    int lo = 15, hi = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = block[4 + j];
      lo = std::min({lo, q & 0xF, q >> 4});
      hi = std::max({hi, q & 0xF, q >> 4});
    }
    ASSERT_EQ(lo, 0) << "block " << b;
    ASSERT_EQ(hi, 15) << "block " << b;
    ++spanning;
  }
  EXPECT_GT(spanning, 0);
}

TEST_F(SmolLm2, AttnQRequantizesToTheFileBytes) {
  const gguf::TensorInfo& t = tensor("blk.0.attn_q.weight");
  const std::vector<float> y = testing::dequantized(t.type, bytes_of(t), t.n_elems());
  const std::vector<uint8_t> q = testing::quantized(GgmlType::kQ4_1, y, t.ne[0]);
  ASSERT_EQ(q.size(), t.n_bytes);
  const auto diff = std::mismatch(q.begin(), q.end(), t.data);
  EXPECT_EQ(diff.first, q.end()) << "first differing byte " << diff.first - q.begin();
}

// Every Q4_1 and Q8_0 tensor of the file (134M weights), dequantized and quantized again.
TEST_F(SmolLm2, EveryTensorRequantizesToTheFileBytes) {
  int checked = 0;
  for (const gguf::TensorInfo& t : file_->tensors()) {
    if (t.type != GgmlType::kQ4_1 && t.type != GgmlType::kQ8_0) continue;
    SCOPED_TRACE(t.name);
    const std::vector<float> y = testing::dequantized(t.type, bytes_of(t), t.n_elems());
    const std::vector<uint8_t> q = testing::quantized(t.type, y, t.ne[0]);
    ASSERT_EQ(q.size(), t.n_bytes);
    EXPECT_TRUE(std::equal(q.begin(), q.end(), t.data));
    ++checked;
  }
  EXPECT_EQ(checked, 211);  // 210 Q4_1 linears + the Q8_0 token embedding
}

// Real weights against normal activations: the Q4_1 x Q8_1 dot of every 37th attn_q row equals
// the float dot of the dequantized operands (with Legacy.DotProductsMatchDequantizedDot's
// allowance for Q8_1's fp16 s).
TEST_F(SmolLm2, AttnQRowDotsMatchDequantizedDots) {
  const gguf::TensorInfo& t = tensor("blk.0.attn_q.weight");
  const int64_t n = t.ne[0];
  const std::vector<uint8_t> a = testing::quantized(
      GgmlType::kQ8_1, testing::random_floats(n, testing::Dist::kNormal, 31), n);
  const std::vector<float> ya = testing::q8_1_dequantized(a, n);
  const uint64_t row_bytes = *ggml_tensor_n_bytes(t.type, n);
  for (int64_t r = 0; r < t.ne[1]; r += 37) {
    SCOPED_TRACE(r);
    const auto w = bytes_of(t).subspan(r * row_bytes, row_bytes);
    const testing::RefDot ref = testing::ref_dot(testing::dequantized(t.type, w, n), ya);
    auto got = vec_dot(t.type, w, a, n);
    ASSERT_TRUE(got.ok());
    EXPECT_NEAR(*got, ref.value, 1e-5 * ref.magnitude + testing::q8_1_s_slack(w, a, n));
  }
}

}  // namespace
}  // namespace bitnet::quant
