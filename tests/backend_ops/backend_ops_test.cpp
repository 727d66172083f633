// The cross-backend op test: every op x shapes x every runnable backend against the CPU
// backend's scalar reference kernels (like ggml's test-backend-ops). Inputs are fed without
// any test-only interface: random F32 tables sit in the weight table and each graph starts
// with embed ops (tokens select rows), then the op under test, whose output is the graph's
// "logits". A backend whose runtime is missing makes these tests report skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "core/fp16.h"
#include "hal/registry.h"
#include "quant/quant.h"

namespace bitnet {
namespace {

using hal::ActId;
using hal::ActType;
using hal::OpKind;

// Weights of a test case, owning their bytes.
struct Weights {
  std::vector<std::vector<uint8_t>> storage;
  std::vector<hal::WeightDesc> table;

  hal::WeightId add(GgmlType type, int64_t n_cols, int64_t n_rows, std::vector<uint8_t> bytes) {
    storage.push_back(std::move(bytes));
    table.push_back({"w" + std::to_string(table.size()), type, {n_cols, n_rows, 1, 1}, storage.back()});
    return static_cast<hal::WeightId>(table.size() - 1);
  }
  hal::WeightId add_f32(int64_t n_cols, int64_t n_rows, std::mt19937& rng, float sd = 1.0f) {
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> v(static_cast<size_t>(n_cols * n_rows));
    for (float& x : v) x = d(rng);
    auto q = quant::quantize(GgmlType::kF32, v.data(), n_rows, n_cols);
    return add(GgmlType::kF32, n_cols, n_rows, std::move(*q));
  }
  hal::WeightId add_float_type(GgmlType type, int64_t n_cols, int64_t n_rows, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 0.5f);
    std::vector<float> v(static_cast<size_t>(n_cols * n_rows));
    for (float& x : v) x = d(rng);
    auto q = quant::quantize(type, v.data(), n_rows, n_cols);
    return add(type, n_cols, n_rows, std::move(*q));
  }
  hal::WeightId add_ternary(GgmlType type, int64_t n_cols, int64_t n_rows, std::mt19937& rng) {
    const int64_t n = n_cols * n_rows;
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    for (auto& c : codes) c = static_cast<uint8_t>(rng() % 3);
    std::vector<float> scales(static_cast<size_t>(n / quant::ternary_scale_block(type, n)));
    for (auto& s : scales) s = fp16_to_fp32(fp32_to_fp16(0.02f + static_cast<float>(rng() % 50) / 1000.0f));
    auto bytes = quant::ternary_encode(type, codes.data(), scales.data(), n);
    return add(type, n_cols, n_rows, std::move(*bytes));
  }
};

// One case: weights, a graph builder for a step (pos0, n_tokens), and how many steps.
struct OpCase {
  std::string name;
  std::function<void(Weights&, std::mt19937&)> make_weights;
  std::function<hal::Graph(int64_t pos0, int64_t n_tokens)> graph;
  std::vector<int64_t> steps;  // n_tokens per step; positions follow on (KV cache)
  int64_t n_ctx = 64;
  int32_t n_layer = 1;
  int64_t n_embd_kv = 0;
  double rel_tol = 1e-4;
};

struct GraphMaker {
  hal::Graph g;
  ActId act(int64_t rows, int64_t cols, ActType t = ActType::kF32) {
    g.acts.push_back({"a", t, rows, cols});
    return static_cast<ActId>(g.acts.size() - 1);
  }
  void op(hal::Op o) { g.ops.push_back(o); }
};

std::vector<OpCase> make_cases() {
  std::vector<OpCase> cases;
  // Input tables hold 64 rows: token t selects row t.
  for (int64_t n : {64, 256, 1000}) {
    for (int64_t nt : {1, 7}) {
      auto w = std::make_shared<std::array<hal::WeightId, 2>>();
      OpCase c;
      c.name = "rms_norm_" + std::to_string(n) + "x" + std::to_string(nt);
      c.make_weights = [n, w](Weights& ws, std::mt19937& rng) {
        (*w)[0] = ws.add_f32(n, 64, rng);
        (*w)[1] = ws.add_f32(n, 1, rng);
      };
      c.graph = [n, w](int64_t pos0, int64_t t) {
        GraphMaker m;
        m.g.n_tokens = t;
        m.g.pos0 = pos0;
        const ActId x = m.act(t, n), y = m.act(t, n);
        m.op({.kind = OpKind::kEmbed, .dst = x, .w = (*w)[0]});
        m.op({.kind = OpKind::kRmsNorm, .dst = y, .a = x, .w = (*w)[1], .eps = 1e-5f});
        m.g.logits = y;
        return m.g;
      };
      c.steps = {nt};
      cases.push_back(c);
    }
  }
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    for (auto [k, rows] : {std::pair<int64_t, int64_t>{256, 96}, {512, 37}, {768, 256}}) {
      for (int64_t nt : {1, 7}) {
        auto w = std::make_shared<std::array<hal::WeightId, 2>>();
        OpCase c;
        c.name = "matmul_w2a8_" + std::string(ggml_type_name(type)) + "_" + std::to_string(k) + "x" +
                 std::to_string(rows) + "_t" + std::to_string(nt);
        c.make_weights = [=](Weights& ws, std::mt19937& rng) {
          (*w)[0] = ws.add_f32(k, 64, rng);
          (*w)[1] = ws.add_ternary(type, k, rows, rng);
        };
        c.graph = [=](int64_t pos0, int64_t t) {
          GraphMaker m;
          m.g.n_tokens = t;
          m.g.pos0 = pos0;
          const ActId x = m.act(t, k), q = m.act(t, k, ActType::kQ8), y = m.act(t, rows);
          m.op({.kind = OpKind::kEmbed, .dst = x, .w = (*w)[0]});
          m.op({.kind = OpKind::kQuantizeAct, .dst = q, .a = x});
          m.op({.kind = OpKind::kMatmul, .dst = y, .a = q, .w = (*w)[1]});
          m.g.logits = y;
          return m.g;
        };
        c.steps = {nt};
        c.rel_tol = 1e-5;
        cases.push_back(c);
      }
    }
  }
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0}) {
    for (auto [k, rows] : {std::pair<int64_t, int64_t>{64, 33}, {256, 512}}) {
      for (int64_t nt : {1, 7}) {
        auto w = std::make_shared<std::array<hal::WeightId, 3>>();
        OpCase c;
        c.name = "matmul_" + std::string(ggml_type_name(type)) + "_" + std::to_string(k) + "x" +
                 std::to_string(rows) + "_t" + std::to_string(nt) + "_scaled";
        c.make_weights = [=](Weights& ws, std::mt19937& rng) {
          (*w)[0] = ws.add_f32(k, 64, rng);
          (*w)[1] = ws.add_float_type(type, k, rows, rng);
          (*w)[2] = ws.add_f32(1, 1, rng);
        };
        c.graph = [=](int64_t pos0, int64_t t) {
          GraphMaker m;
          m.g.n_tokens = t;
          m.g.pos0 = pos0;
          const ActId x = m.act(t, k), y = m.act(t, rows);
          m.op({.kind = OpKind::kEmbed, .dst = x, .w = (*w)[0]});
          m.op({.kind = OpKind::kMatmul, .dst = y, .a = x, .w = (*w)[1]});
          m.op({.kind = OpKind::kScale, .dst = y, .w = (*w)[2]});
          m.g.logits = y;
          return m.g;
        };
        c.steps = {nt};
        cases.push_back(c);
      }
    }
  }
  for (GgmlType type : {GgmlType::kF16, GgmlType::kQ8_0}) {
    auto w = std::make_shared<std::array<hal::WeightId, 1>>();
    OpCase c;
    c.name = "embed_" + std::string(ggml_type_name(type));
    c.make_weights = [=](Weights& ws, std::mt19937& rng) { (*w)[0] = ws.add_float_type(type, 128, 64, rng); };
    c.graph = [=](int64_t pos0, int64_t t) {
      GraphMaker m;
      m.g.n_tokens = t;
      m.g.pos0 = pos0;
      const ActId x = m.act(t, 128);
      m.op({.kind = OpKind::kEmbed, .dst = x, .w = (*w)[0]});
      m.g.logits = x;
      return m.g;
    };
    c.steps = {5};
    cases.push_back(c);
  }
  for (OpKind kind : {OpKind::kSiluMul, OpKind::kRelu2Mul, OpKind::kAdd}) {
    auto w = std::make_shared<std::array<hal::WeightId, 2>>();
    OpCase c;
    c.name = std::string(hal::op_name(kind));
    c.make_weights = [=](Weights& ws, std::mt19937& rng) {
      (*w)[0] = ws.add_f32(300, 64, rng);
      (*w)[1] = ws.add_f32(300, 64, rng);
    };
    c.graph = [=](int64_t pos0, int64_t t) {
      GraphMaker m;
      m.g.n_tokens = t;
      m.g.pos0 = pos0;
      const ActId a = m.act(t, 300), b = m.act(t, 300), y = m.act(t, 300);
      m.op({.kind = OpKind::kEmbed, .dst = a, .w = (*w)[0]});
      m.op({.kind = OpKind::kEmbed, .dst = b, .w = (*w)[1]});
      m.op({.kind = kind, .dst = y, .a = a, .b = b});
      m.g.logits = y;
      return m.g;
    };
    c.steps = {3};
    cases.push_back(c);
  }
  {
    auto w = std::make_shared<std::array<hal::WeightId, 1>>();
    OpCase c;
    c.name = "copy_rows";
    c.make_weights = [=](Weights& ws, std::mt19937& rng) { (*w)[0] = ws.add_f32(96, 64, rng); };
    c.graph = [=](int64_t pos0, int64_t t) {
      GraphMaker m;
      m.g.n_tokens = t;
      m.g.pos0 = pos0;
      const ActId x = m.act(t, 96), y = m.act(1, 96);
      m.op({.kind = OpKind::kEmbed, .dst = x, .w = (*w)[0]});
      m.op({.kind = OpKind::kCopyRows, .dst = y, .a = x, .row0 = t - 1});
      m.g.logits = y;
      return m.g;
    };
    c.steps = {6};
    cases.push_back(c);
  }
  for (hal::RopeStyle style : {hal::RopeStyle::kNorm, hal::RopeStyle::kNeox}) {
    for (int32_t head_dim : {16, 64}) {
      for (int32_t n_rot : {head_dim, head_dim / 2}) {
        auto w = std::make_shared<std::array<hal::WeightId, 1>>();
        const int32_t n_head = 3;
        OpCase c;
        c.name = std::string("rope_") + (style == hal::RopeStyle::kNorm ? "norm" : "neox") + "_d" +
                 std::to_string(head_dim) + "_r" + std::to_string(n_rot);
        c.make_weights = [=](Weights& ws, std::mt19937& rng) { (*w)[0] = ws.add_f32(n_head * head_dim, 64, rng); };
        c.graph = [=](int64_t pos0, int64_t t) {
          GraphMaker m;
          m.g.n_tokens = t;
          m.g.pos0 = pos0;
          m.g.rope = {style, n_rot, 10000.0f, 1.0f};
          m.g.attn = {n_head, n_head, head_dim, 1.0f};
          const ActId x = m.act(t, n_head * head_dim);
          m.op({.kind = OpKind::kEmbed, .dst = x, .w = (*w)[0]});
          m.op({.kind = OpKind::kRope, .dst = x, .n_head = n_head});
          m.g.logits = x;
          return m.g;
        };
        c.steps = {4, 1, 9};  // positions 0-3, 4, 5-13
        cases.push_back(c);
      }
    }
  }
  for (auto [n_head, n_head_kv] : {std::pair<int32_t, int32_t>{4, 1}, {4, 2}, {4, 4}}) {
    for (int32_t head_dim : {32, 64}) {
      auto w = std::make_shared<std::array<hal::WeightId, 3>>();
      OpCase c;
      c.name = "attention_h" + std::to_string(n_head) + "_kv" + std::to_string(n_head_kv) + "_d" + std::to_string(head_dim);
      c.make_weights = [=](Weights& ws, std::mt19937& rng) {
        (*w)[0] = ws.add_f32(n_head * head_dim, 64, rng);
        (*w)[1] = ws.add_f32(n_head_kv * head_dim, 64, rng);
        (*w)[2] = ws.add_f32(n_head_kv * head_dim, 64, rng);
      };
      c.graph = [=](int64_t pos0, int64_t t) {
        GraphMaker m;
        m.g.n_tokens = t;
        m.g.pos0 = pos0;
        m.g.attn = {n_head, n_head_kv, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
        const ActId q = m.act(t, n_head * head_dim), k = m.act(t, n_head_kv * head_dim),
                    v = m.act(t, n_head_kv * head_dim), y = m.act(t, n_head * head_dim);
        m.op({.kind = OpKind::kEmbed, .dst = q, .w = (*w)[0]});
        m.op({.kind = OpKind::kEmbed, .dst = k, .w = (*w)[1]});
        m.op({.kind = OpKind::kEmbed, .dst = v, .w = (*w)[2]});
        m.op({.kind = OpKind::kStoreKv, .a = k, .b = v, .il = 1});
        m.op({.kind = OpKind::kAttention, .dst = y, .a = q, .il = 1});
        m.g.logits = y;
        return m.g;
      };
      c.steps = {7, 1, 1, 5};
      c.n_layer = 2;
      c.n_embd_kv = n_head_kv * head_dim;
      cases.push_back(c);
    }
  }
  return cases;
}

std::vector<hal::DeviceInfo> runnable_gpu_devices(std::string& why_none) {
  std::vector<hal::DeviceInfo> out;
  for (const hal::BackendProbe& p : hal::probe_backends({})) {
    if (p.backend == "cpu") continue;
    if (!p.available) {
      why_none += p.backend + ": " + (p.compiled ? p.reason : "not compiled in") + "; ";
      continue;
    }
    for (const hal::DeviceInfo& d : p.devices) out.push_back(d);
  }
  return out;
}

// Runs `c` on `b` (fresh weights and KV), returning each step's output.
std::vector<std::vector<float>> run_case(hal::Backend& b, const OpCase& c, const Weights& w) {
  std::vector<std::vector<float>> outs;
  EXPECT_TRUE(b.load_weights(w.table).ok());
  const int64_t n_embd_kv = c.n_embd_kv > 0 ? c.n_embd_kv : 1;
  EXPECT_TRUE(b.init_kv({c.n_layer, c.n_ctx, n_embd_kv}).ok());
  int64_t pos = 0;
  for (int64_t n : c.steps) {
    const hal::Graph g = c.graph(pos, n);
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) tokens[static_cast<size_t>(t)] = static_cast<int32_t>((pos + t * 7) % 64);
    const hal::ActDesc& out = g.acts[static_cast<size_t>(g.logits)];
    std::vector<float> y(static_cast<size_t>(out.n_rows * out.n_cols));
    const Status s = b.compute(g, tokens, y);
    EXPECT_TRUE(s.ok()) << s.to_string();
    outs.push_back(std::move(y));
    pos += n;
  }
  return outs;
}

class BackendOps : public testing::TestWithParam<std::string> {};

TEST_P(BackendOps, EveryRunnableBackendMatchesTheCpuReference) {
  std::string why_none;
  const std::vector<hal::DeviceInfo> devices = runnable_gpu_devices(why_none);
  if (devices.empty()) GTEST_SKIP() << "no runnable backend besides the CPU (" << why_none << ")";
  const std::vector<OpCase> cases = make_cases();
  const auto it = std::find_if(cases.begin(), cases.end(), [&](const OpCase& c) { return c.name == GetParam(); });
  ASSERT_NE(it, cases.end());
  const OpCase& c = *it;
  std::mt19937 rng(1234);
  Weights w;
  c.make_weights(w, rng);
  auto cpu = cpu::make_cpu_backend({1, "scalar"});
  const auto want = run_case(*cpu, c, w);
  for (const hal::DeviceInfo& d : devices) {
    auto backend = hal::create_backend(d, {1, ""});
    ASSERT_TRUE(backend.ok()) << d.id << ": " << backend.status().to_string();
    const auto got = run_case(**backend, c, w);
    ASSERT_EQ(got.size(), want.size());
    for (size_t s = 0; s < want.size(); ++s) {
      ASSERT_EQ(got[s].size(), want[s].size());
      double max_err = 0.0;
      for (size_t i = 0; i < want[s].size(); ++i) {
        const double err = std::abs(static_cast<double>(got[s][i]) - want[s][i]) / (1.0 + std::abs(want[s][i]));
        max_err = std::max(max_err, err);
      }
      EXPECT_LE(max_err, c.rel_tol) << d.id << " step " << s;
    }
  }
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const OpCase& c : make_cases()) names.push_back(c.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Ops, BackendOps, testing::ValuesIn(case_names()),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace bitnet
