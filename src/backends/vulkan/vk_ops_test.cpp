// Per-op tests: single-op graphs run on Vulkan and on the CPU reference backend. Inputs are
// random F32 "input tables" in the weight table, gathered into activations by embed ops.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "backends/vulkan/vk_test_graphs.h"

namespace bitnet::vulkan::test {
namespace {

using hal::ActType;
using hal::OpKind;

// ---- embed and the float matmul, every float weight type ----

class VulkanFloatTypes : public testing::TestWithParam<GgmlType> {};

TEST_P(VulkanFloatTypes, Embed) {
  RUNNER_OR_SKIP(r, VulkanOptions{});
  Weights w;
  const hal::WeightId table = w.add_float(GetParam(), 96, kVocab);
  r.load(w);
  for (int64_t n_tokens : {1, 7}) {
    G g(n_tokens);
    r.check(g.g, g.input(table, 96), 0.0, 0.0);  // exact
  }
}

// Q8_0's matmul is the CPU's integer dot on quantized activations, and so is the Vulkan one
// by default (VulkanOptions::quant_dot: quantize_q8 + matmul_quant): bit-identical too. Its
// float path is checked against the dequantized reference in vk_quant_test.cpp.
TEST_P(VulkanFloatTypes, Matmul) {
  RUNNER_OR_SKIP(r, VulkanOptions{});
  Weights w;
  const hal::WeightId x = w.add_float(GgmlType::kF32, 160, kVocab);
  const hal::WeightId m = w.add_float(GetParam(), 160, 37);
  r.load(w);
  for (int64_t n_tokens : {1, 7}) {
    G g(n_tokens);
    const hal::ActId in = g.input(x, 160);
    const hal::ActId out = g.act(37);
    g.op({.kind = OpKind::kMatmul, .dst = out, .a = in, .w = m});
    r.check(g.g, out, 0.0, 0.0);  // the reference's summation order: bit-identical
  }
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanFloatTypes,
                         testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0),
                         [](const auto& p) { return std::string(ggml_type_name(p.param)); });

// ---- quantize_act + the W2A8 matmul, every ternary type ----

struct TernaryCase {
  GgmlType type;
  int64_t n_cols;
  int64_t n_rows;
};

void PrintTo(const TernaryCase& c, std::ostream* os) {
  *os << ggml_type_name(c.type) << " " << c.n_cols << "x" << c.n_rows;
}

class VulkanTernaryTypes : public testing::TestWithParam<TernaryCase> {};

// Both W2A8 shaders: the packed int8 dot product (where the device has it: lavapipe does) and
// the plain loop, each bit-identical to the reference.
TEST_P(VulkanTernaryTypes, QuantizeAndMatmulW2A8) {
  const TernaryCase c = GetParam();
  const auto devices = probe().devices;
  const bool device_dot = !devices.empty() && devices[0].int8_dot;
  for (bool int8_dot : {true, false}) {
    RUNNER_OR_SKIP(r, VulkanOptions{.int8_dot = int8_dot});
    Weights w;
    const hal::WeightId x = w.add_float(GgmlType::kF32, c.n_cols, kVocab, -3.0f, 3.0f);
    const hal::WeightId m = w.add_ternary(c.type, c.n_cols, c.n_rows);
    r.load(w);
    for (int64_t n_tokens : {1, 7}) {
      G g(n_tokens);
      const hal::ActId in = g.input(x, c.n_cols);
      const hal::ActId q = g.act(c.n_cols, ActType::kQ8);
      const hal::ActId out = g.act(c.n_rows);
      g.op({.kind = OpKind::kQuantizeAct, .dst = q, .a = in});
      g.op({.kind = OpKind::kMatmul, .dst = out, .a = q, .w = m});
      r.check(g.g, out, 0.0, 0.0);  // exact integer sums, the reference's float steps: bit-identical
    }
    const auto used = r.vk->kernels_used();
    const char* matmul = int8_dot && device_dot ? "vulkan:matmul_w2a8_dot" : "vulkan:matmul_w2a8";
    EXPECT_NE(std::find(used.begin(), used.end(), matmul), used.end()) << matmul;
    EXPECT_NE(std::find(used.begin(), used.end(), "vulkan:quantize_act"), used.end());
  }
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanTernaryTypes,
                         testing::Values(TernaryCase{GgmlType::kI2_S, 384, 37}, TernaryCase{GgmlType::kI2_S, 128, 1},
                                         TernaryCase{GgmlType::kTQ2_0, 512, 33}, TernaryCase{GgmlType::kTQ1_0, 768, 29},
                                         TernaryCase{GgmlType::kTQ2_0, 256 * 40, 5}),
                         [](const auto& p) {
                           return std::string(ggml_type_name(p.param.type)) + "_" + std::to_string(p.param.n_cols) +
                                  "x" + std::to_string(p.param.n_rows);
                         });

TEST(VulkanOps, QuantizeActEdgeCases) {
  // All-zero rows (the 1e-5 floor), tiny values and exact halves: q must be bit-exact, which
  // the matmul against an identity-like ternary weight exposes.
  RUNNER_OR_SKIP(r, VulkanOptions{});
  Weights w;
  std::vector<float> rows(static_cast<size_t>(kVocab * 128), 0.0f);
  for (int64_t i = 0; i < 128; ++i) {
    rows[static_cast<size_t>(128 + i)] = 1e-6f * static_cast<float>(i);       // row 1: below the floor
    rows[static_cast<size_t>(256 + i)] = static_cast<float>(i % 9) - 4.0f;   // row 2: halves after scaling
    rows[static_cast<size_t>(384 + i)] = i == 5 ? 127.0f : 0.5f;             // row 3
  }
  std::vector<uint8_t> bytes(rows.size() * 4);
  std::memcpy(bytes.data(), rows.data(), bytes.size());
  const hal::WeightId x = w.add(GgmlType::kF32, 128, kVocab, bytes);
  const hal::WeightId m = w.add_ternary(GgmlType::kI2_S, 128, 64);
  r.load(w);
  G g(7);
  const hal::ActId in = g.input(x, 128);
  const hal::ActId q = g.act(128, ActType::kQ8);
  const hal::ActId out = g.act(64);
  g.op({.kind = OpKind::kQuantizeAct, .dst = q, .a = in});
  g.op({.kind = OpKind::kMatmul, .dst = out, .a = q, .w = m});
  r.check(g.g, out, 0.0, 0.0);
}

// ---- norms, elementwise ops, scale, copy_rows ----

TEST(VulkanOps, RmsNorm) {
  RUNNER_OR_SKIP(r, VulkanOptions{});
  Weights w;
  const hal::WeightId x = w.add_float(GgmlType::kF32, 100, kVocab, -2.0f, 2.0f);
  const hal::WeightId gain = w.add_float(GgmlType::kF32, 100, 1);
  const hal::WeightId gain16 = w.add_float(GgmlType::kF16, 100, 1);  // 1-D: dequantized at load
  r.load(w);
  for (int64_t n_tokens : {1, 7}) {
    G g(n_tokens);
    const hal::ActId in = g.input(x, 100);
    const hal::ActId out = g.act(100);
    g.op({.kind = OpKind::kRmsNorm, .dst = out, .a = in, .w = gain, .eps = 1e-5f});
    g.op({.kind = OpKind::kRmsNorm, .dst = out, .a = out, .w = gain16, .eps = 1e-6f});  // in place
    r.check(g.g, out, 1e-6);
  }
}

TEST(VulkanOps, ElementwiseAndScale) {
  RUNNER_OR_SKIP(r, VulkanOptions{});
  Weights w;
  const hal::WeightId xa = w.add_float(GgmlType::kF32, 300, kVocab, -4.0f, 4.0f);
  const hal::WeightId xb = w.add_float(GgmlType::kF32, 300, kVocab, -4.0f, 4.0f);
  const hal::WeightId s = w.add_float(GgmlType::kF32, 1, 1, 0.5f, 2.0f);
  r.load(w);
  for (OpKind kind : {OpKind::kAdd, OpKind::kSiluMul, OpKind::kRelu2Mul}) {
    for (int64_t n_tokens : {1, 7}) {
      G g(n_tokens);
      const hal::ActId a = g.input(xa, 300);
      const hal::ActId b = g.input(xb, 300);
      const hal::ActId out = g.act(300);
      g.op({.kind = kind, .dst = out, .a = a, .b = b});
      g.op({.kind = kind, .dst = a, .a = a, .b = out});  // dst aliasing a
      g.op({.kind = OpKind::kScale, .dst = a, .w = s});
      r.check(g.g, a, 1e-6);
    }
  }
}

TEST(VulkanOps, CopyRows) {
  RUNNER_OR_SKIP(r, VulkanOptions{});
  Weights w;
  const hal::WeightId x = w.add_float(GgmlType::kF32, 50, kVocab);
  r.load(w);
  G g(7);
  const hal::ActId in = g.input(x, 50);
  const hal::ActId out = g.act(50, ActType::kF32, 2);
  g.op({.kind = OpKind::kCopyRows, .dst = out, .a = in, .row0 = 4});
  r.check(g.g, out, 0.0, 0.0);
}

// ---- rope, store_kv and attention, through several steps of one sequence ----

struct AttnCase {
  hal::RopeStyle style;
  int32_t n_head;
  int32_t n_head_kv;
  int32_t head_dim;
  int32_t n_rot;
  float freq_scale;
};

void PrintTo(const AttnCase& c, std::ostream* os) {
  *os << c.n_head << " heads, " << c.n_head_kv << " kv heads, head_dim " << c.head_dim << ", n_rot " << c.n_rot;
}

class VulkanAttention : public testing::TestWithParam<AttnCase> {};

TEST_P(VulkanAttention, RopeStoreKvAttentionOverSteps) {
  const AttnCase c = GetParam();
  RUNNER_OR_SKIP(r, VulkanOptions{});
  const int64_t n_embd = static_cast<int64_t>(c.n_head) * c.head_dim;
  const int64_t n_embd_kv = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  Weights w;
  const hal::WeightId xq = w.add_float(GgmlType::kF32, n_embd, kVocab, -2.0f, 2.0f);
  const hal::WeightId xk = w.add_float(GgmlType::kF32, n_embd_kv, kVocab, -2.0f, 2.0f);
  const hal::WeightId xv = w.add_float(GgmlType::kF32, n_embd_kv, kVocab, -2.0f, 2.0f);
  r.load(w, {3, 100, n_embd_kv});
  int64_t pos = 0;
  for (int64_t n_tokens : {7, 1, 1, 5, 70}) {  // a prompt chunk, decode steps, more chunks
    G g(n_tokens, pos);
    g.g.rope = {c.style, c.n_rot, 10000.0f, c.freq_scale};
    g.g.attn = {c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
    const hal::ActId q = g.input(xq, n_embd);
    const hal::ActId k = g.input(xk, n_embd_kv);
    const hal::ActId v = g.input(xv, n_embd_kv);
    const hal::ActId out = g.act(n_embd);
    g.op({.kind = OpKind::kRope, .dst = q, .n_head = c.n_head});
    g.op({.kind = OpKind::kRope, .dst = k, .n_head = c.n_head_kv});
    g.op({.kind = OpKind::kStoreKv, .a = k, .b = v, .il = 2});
    g.op({.kind = OpKind::kAttention, .dst = out, .a = q, .il = 2});
    SCOPED_TRACE(testing::Message() << "pos0 " << pos << " n_tokens " << n_tokens);
    r.check(g.g, out, 2e-6);
    // rope alone, at this position
    G gr(n_tokens, pos);
    gr.g.rope = g.g.rope;
    gr.g.attn = g.g.attn;
    const hal::ActId rq = gr.input(xq, n_embd);
    gr.op({.kind = OpKind::kRope, .dst = rq, .n_head = c.n_head});
    r.check(gr.g, rq, 0.0, 0.0);  // the same table and products: exact
    pos += n_tokens;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, VulkanAttention,
                         testing::Values(AttnCase{hal::RopeStyle::kNeox, 8, 2, 16, 16, 1.0f},   // GQA 4:1
                                         AttnCase{hal::RopeStyle::kNorm, 4, 4, 32, 32, 1.0f},   // 1:1
                                         AttnCase{hal::RopeStyle::kNorm, 6, 3, 24, 16, 0.5f},   // partial rope
                                         AttnCase{hal::RopeStyle::kNeox, 2, 1, 128, 128, 1.0f}),
                         [](const auto& p) {
                           const AttnCase& c = p.param;
                           return std::string(c.style == hal::RopeStyle::kNeox ? "neox_" : "norm_") +
                                  std::to_string(c.n_head) + "x" + std::to_string(c.n_head_kv) + "_d" +
                                  std::to_string(c.head_dim) + "_rot" + std::to_string(c.n_rot);
                         });

}  // namespace
}  // namespace bitnet::vulkan::test
