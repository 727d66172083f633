// Test scaffolding shared by the per-op and backend tests: a weight table with random input
// tables and weights of every type, single-op graphs fed by embed ops, and a runner that
// compares Vulkan with the CPU reference.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/vulkan/vk_test_util.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace bitnet::vulkan::test {

using hal::ActType;
using hal::OpKind;

class Weights {
 public:
  hal::WeightId add(GgmlType type, int64_t n_cols, int64_t n_rows, std::vector<uint8_t> bytes) {
    storage_.push_back(std::move(bytes));
    hal::WeightDesc d;
    d.name = fmt::format("w{}", descs_.size());
    d.type = type;
    d.ne = {n_cols, n_rows, 1, 1};
    d.bytes = storage_.back();
    descs_.push_back(d);
    return static_cast<hal::WeightId>(descs_.size() - 1);
  }
  std::vector<float> random(int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = u(rng_);
    return v;
  }
  // A float-path weight of `type` from random values.
  hal::WeightId add_float(GgmlType type, int64_t n_cols, int64_t n_rows, float lo = -1.0f, float hi = 1.0f) {
    const std::vector<float> v = random(n_cols * n_rows, lo, hi);
    std::vector<uint8_t> bytes;
    if (type == GgmlType::kF32) {
      bytes.resize(v.size() * 4);
      std::memcpy(bytes.data(), v.data(), bytes.size());
    } else if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
      bytes.resize(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = type == GgmlType::kF16 ? fp32_to_fp16(v[i]) : fp32_to_bf16(v[i]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    } else {
      auto q = quant::quantize(type, v.data(), n_rows, n_cols);
      EXPECT_TRUE(q.ok()) << q.status().to_string();
      bytes = std::move(q).value();
    }
    return add(type, n_cols, n_rows, std::move(bytes));
  }
  // A ternary weight: random codes, scales exact in fp16.
  hal::WeightId add_ternary(GgmlType type, int64_t n_cols, int64_t n_rows) {
    const int64_t n = n_cols * n_rows;
    std::uniform_int_distribution<int> code(0, 2);
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    for (uint8_t& c : codes) c = static_cast<uint8_t>(code(rng_));
    const int64_t block = quant::ternary_scale_block(type, n);
    std::vector<float> scales(static_cast<size_t>(n / block));
    std::uniform_int_distribution<int> k(1, 64);
    for (float& s : scales) s = static_cast<float>(k(rng_)) / 32.0f;
    auto bytes = quant::ternary_encode(type, codes.data(), scales.data(), n);
    EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
    return add(type, n_cols, n_rows, std::move(bytes).value());
  }
  std::span<const hal::WeightDesc> table() const { return descs_; }

 private:
  std::mt19937 rng_{1234};
  std::vector<std::vector<uint8_t>> storage_;
  std::vector<hal::WeightDesc> descs_;
};

// A graph of n_tokens at pos0 with the attention/rope parameters tests need.
struct G {
  hal::Graph g;
  G(int64_t n_tokens, int64_t pos0 = 0) {
    g.n_tokens = n_tokens;
    g.pos0 = pos0;
    g.rope = {hal::RopeStyle::kNeox, 16, 10000.0f, 1.0f};
    g.attn = {4, 4, 16, 0.25f};
  }
  hal::ActId act(int64_t n_cols, ActType type = ActType::kF32, int64_t n_rows = -1) {
    g.acts.push_back({"act", type, n_rows < 0 ? g.n_tokens : n_rows, n_cols});
    return static_cast<hal::ActId>(g.acts.size() - 1);
  }
  // An F32 activation filled from input table w (rows selected by the tokens).
  hal::ActId input(hal::WeightId w, int64_t n_cols) {
    const hal::ActId a = act(n_cols);
    g.ops.push_back({.kind = OpKind::kEmbed, .dst = a, .w = w});
    return a;
  }
  void op(hal::Op o) { g.ops.push_back(o); }
};

inline constexpr int64_t kVocab = 11;  // rows of each input table

inline std::vector<int32_t> tokens_for(int64_t n_tokens) {
  std::vector<int32_t> t(static_cast<size_t>(n_tokens));
  for (int64_t i = 0; i < n_tokens; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((3 * i + 2) % kVocab);
  return t;
}

struct Runner {
  std::unique_ptr<hal::Backend> vk;
  std::unique_ptr<hal::Backend> cpu = cpu_reference();

  void load(const Weights& w, hal::KvShape kv = {2, 32, 64}) {
    ASSERT_TRUE(vk->load_weights(w.table()).ok());
    ASSERT_TRUE(cpu->load_weights(w.table()).ok());
    ASSERT_TRUE(vk->init_kv(kv).ok());
    ASSERT_TRUE(cpu->init_kv(kv).ok());
  }
  // Runs g on both; expects max |diff| <= rel * max|ref| + abs.
  void check(hal::Graph& g, hal::ActId out, double rel, double abs = 1e-6) {
    g.logits = out;
    const hal::ActDesc& d = g.acts[static_cast<size_t>(out)];
    const std::vector<int32_t> tokens = tokens_for(g.n_tokens);
    std::vector<float> a(static_cast<size_t>(d.n_rows * d.n_cols)), b(a.size());
    const Status sv = vk->compute(g, tokens, a);
    ASSERT_TRUE(sv.ok()) << sv.to_string();
    const Status sc = cpu->compute(g, tokens, b);
    ASSERT_TRUE(sc.ok()) << sc.to_string();
    const Diff diff = compare(a, b);
    EXPECT_LE(diff.max_abs, rel * diff.max_ref + abs) << "max |ref| " << diff.max_ref;
    EXPECT_GT(diff.max_ref, 0.0);
  }
};

#define RUNNER_OR_SKIP(r, options)                    \
  BITNET_VK_BACKEND_OR_SKIP(r##_vk, options);         \
  Runner r;                                           \
  r.vk = std::move(r##_vk)

}  // namespace bitnet::vulkan::test
