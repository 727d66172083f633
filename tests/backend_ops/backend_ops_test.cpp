// The cross-backend op test: every op x shapes x every runnable backend against the CPU
// backend's scalar reference kernels (like ggml's test-backend-ops). Inputs are fed without
// any test-only interface: random F32 tables sit in the weight table and each graph starts
// with embed ops (tokens select rows), then the op under test, whose output is the graph's
// "logits". A backend whose runtime is missing makes these tests report skipped.
// Built again with BITNET_BACKEND_OPS_ONLY="cuda" and "hip" (cuda_backend_ops_test and
// hip_backend_ops_test, ctest label gpu): only that backend's devices are compared, the CPU
// reference keeps an F16 KV cache as the CUDA backend (and its HIP build) does, and an op the
// kernels refuse with kUnsupported (attention over heads of more than 256) reports that case
// skipped on it, with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <map>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "backends/cpu/cpu_backend.h"
#include "core/fp16.h"
#include "hal/registry.h"
#include "quant/quant.h"

namespace bitnet {
namespace {

using hal::ActId;
using hal::ActType;
using hal::OpKind;

#ifdef BITNET_BACKEND_OPS_ONLY
constexpr std::string_view kOnlyBackend = BITNET_BACKEND_OPS_ONLY;
#else
constexpr std::string_view kOnlyBackend{};
#endif
// The CUDA backend and its HIP build keep an F16 KV cache whatever is asked.
constexpr bool f16_kv_backend(std::string_view backend) { return backend == "cuda" || backend == "hip"; }
// The KV cache type asked of every backend, the CPU reference included.
constexpr hal::KvType kKvType = f16_kv_backend(kOnlyBackend) ? hal::KvType::kF16 : hal::KvType::kF32;

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
  // llama.cpp's block formats: N(0, 0.5) through the reference quantizer where there is one
  // (Q4_0 .. Q6_K), else random block bytes (Q2_K, Q3_K, IQ4_NL, IQ4_XS are dequantize-only
  // here) with finite fp16 scales.
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
  // When set: per-output absolute bounds of a step (its tokens given) instead of rel_tol.
  std::function<std::vector<double>(const Weights&, const std::vector<int32_t>& tokens)> abs_tol;
  // A backend other than OpenCL that refuses the weights as an unsupported type is skipped
  // (with the reason printed) for this case.
  bool others_may_refuse = false;
};

// The tokens of a step: input-table rows (pos + 7t) mod 64.
std::vector<int32_t> step_tokens(int64_t pos, int64_t n) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) tokens[static_cast<size_t>(t)] = static_cast<int32_t>((pos + t * 7) % 64);
  return tokens;
}

std::vector<float> f32_values(const hal::WeightDesc& d) {
  const int64_t n = d.ne[0] * d.ne[1] * d.ne[2] * d.ne[3];
  std::vector<float> v(static_cast<size_t>(n));
  EXPECT_TRUE(quant::dequantize(d.type, d.bytes, n, v.data()).ok());
  return v;
}

// How far the CPU's y = s * (W x) may be from a GPU's for a block-quantized W (Q4_0 ...): the
// GPU kernels (OpenCL, CUDA; Vulkan with VulkanOptions::quant_dot off) dot the dequantized weights
// with the float activations (Vulkan by default quantizes them as the CPU does, so it lands
// well inside the bound: bit for bit against the scalar set), the CPU (as llama.cpp)
// with activations quantized to 8 bits per block of quant::vec_dot_type(type) (Q8_0/Q8_1: 32,
// Q8_K: 256; none: float activations on both). Per output:
//   |s| * (sum_k |w_k| * e_k  [+ Q8_1: sum_b |m_b| * sum_{k in b} |x_k| * 2^-9]) + float slack
// with e_k = max|x| of k's block / 127 / 2 (the rounding of x to a step of max/127), plus
// max * 2^-11 where the block scale is stored as fp16 (Q8_0, Q8_1: q * fp16(d) moves by up to
// 127 * half an ulp of d); Q8_1's sum term s = fp16(d * sum q) is rounded too (the m_b term).
// Float slack: both sides' n-term float sums, (n / 8 + 16) roundings of 2^-24 of
// sum |w_k| (|x_k| + e_k), doubled, and the scale's own rounding.
std::vector<double> block_matmul_bounds(GgmlType type, const hal::WeightDesc& x_table, const hal::WeightDesc& wd,
                                        const hal::WeightDesc& scale, const std::vector<int32_t>& tokens) {
  const int64_t k = wd.ne[0], rows = wd.ne[1];
  const std::vector<float> x = f32_values(x_table);
  const std::vector<float> w = f32_values(wd);
  const double s = std::abs(static_cast<double>(f32_values(scale)[0]));
  const std::optional<GgmlType> act = quant::vec_dot_type(type);
  const bool cpu_quantizes = act.has_value() && quant::vec_dot_fn(type) != nullptr;
  const int64_t block = !cpu_quantizes ? 0 : (*act == GgmlType::kQ8_K ? 256 : 32);
  const double d_rounding = cpu_quantizes && *act != GgmlType::kQ8_K ? 0x1p-11 : 0x1p-22;
  const double roundings = 2.0 * static_cast<double>(k / 8 + 16) * 0x1p-24;
  const uint64_t w_row_bytes = ggml_tensor_n_bytes(type, k).value();
  std::vector<double> bounds;
  for (int32_t tok : tokens) {
    const float* xr = x.data() + static_cast<int64_t>(tok) * k;
    std::vector<double> e(static_cast<size_t>(k), 0.0);
    std::vector<double> block_abs_sum(block > 0 ? static_cast<size_t>(k / block) : 0, 0.0);
    for (int64_t b0 = 0; block > 0 && b0 < k; b0 += block) {
      double amax = 0.0, sum = 0.0;
      for (int64_t i = b0; i < b0 + block; ++i) {
        amax = std::max(amax, std::abs(static_cast<double>(xr[i])));
        sum += std::abs(static_cast<double>(xr[i]));
      }
      for (int64_t i = b0; i < b0 + block; ++i) e[static_cast<size_t>(i)] = amax / 127.0 / 2.0 + amax * d_rounding;
      block_abs_sum[static_cast<size_t>(b0 / block)] = sum;
    }
    for (int64_t r = 0; r < rows; ++r) {
      double act_err = 0.0, mag = 0.0;
      for (int64_t i = 0; i < k; ++i) {
        const double wa = std::abs(static_cast<double>(w[static_cast<size_t>(r * k + i)]));
        act_err += wa * e[static_cast<size_t>(i)];
        mag += wa * (std::abs(static_cast<double>(xr[i])) + e[static_cast<size_t>(i)]);
      }
      if (cpu_quantizes && *act == GgmlType::kQ8_1) {
        // Q4_1 / Q5_1 blocks: fp16 d, fp16 m, then the codes.
        const int64_t block_bytes = static_cast<int64_t>(w_row_bytes) / (k / 32);
        for (int64_t b = 0; b < k / 32; ++b) {
          const uint8_t* blk = wd.bytes.data() + r * static_cast<int64_t>(w_row_bytes) + b * block_bytes;
          const double m = fp16_to_fp32(static_cast<uint16_t>(blk[2] | blk[3] << 8));
          act_err += std::abs(m) * block_abs_sum[static_cast<size_t>(b)] * 0x1p-9;
        }
      }
      const double dot_bound = act_err + roundings * mag;
      bounds.push_back(s * dot_bound * (1.0 + 0x1p-22) + s * mag * 0x1p-23 + 1e-30);
    }
  }
  return bounds;
}

struct GraphMaker {
  hal::Graph g;
  ActId act(int64_t rows, int64_t cols, ActType t = ActType::kF32) {
    g.acts.push_back({"a", t, rows, cols});
    return static_cast<ActId>(g.acts.size() - 1);
  }
  void op(hal::Op o) { g.ops.push_back(o); }
};

// y = s * (W x) for W of `type` (k x rows), x embedded from a 64-row F32 table, one step of nt
// tokens; w holds the table, W and s.
OpCase scaled_matmul_case(GgmlType type, int64_t k, int64_t rows, int64_t nt,
                          std::shared_ptr<std::array<hal::WeightId, 3>> w) {
  OpCase c;
  c.name = "matmul_" + std::string(ggml_type_name(type)) + "_" + std::to_string(k) + "x" + std::to_string(rows) +
           "_t" + std::to_string(nt) + "_scaled";
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
  return c;
}

// The rows of a 64-row table of `type` (n_cols wide) picked by 5 tokens.
OpCase embed_case(GgmlType type, int64_t n_cols) {
  auto w = std::make_shared<std::array<hal::WeightId, 1>>();
  OpCase c;
  c.name = "embed_" + std::string(ggml_type_name(type));
  c.make_weights = [=](Weights& ws, std::mt19937& rng) { (*w)[0] = ws.add_float_type(type, n_cols, 64, rng); };
  c.graph = [=](int64_t pos0, int64_t t) {
    GraphMaker m;
    m.g.n_tokens = t;
    m.g.pos0 = pos0;
    const ActId x = m.act(t, n_cols);
    m.op({.kind = OpKind::kEmbed, .dst = x, .w = (*w)[0]});
    m.g.logits = x;
    return m.g;
  };
  c.steps = {5};
  return c;
}

// x: n columns embedded from a 64-row table, then one op with a one-row weight of m columns,
// writing x in place or a new activation y; one step of nt tokens. `make_op(dst, x, w)`.
OpCase row_weight_case(std::string name, int64_t n, int64_t m, int64_t nt, bool in_place,
                       std::function<hal::Op(ActId dst, ActId x, hal::WeightId w)> make_op) {
  auto w = std::make_shared<std::array<hal::WeightId, 2>>();
  OpCase c;
  c.name = std::move(name);
  c.make_weights = [=](Weights& ws, std::mt19937& rng) {
    (*w)[0] = ws.add_f32(n, 64, rng);
    (*w)[1] = ws.add_f32(m, 1, rng);
  };
  c.graph = [=](int64_t pos0, int64_t t) {
    GraphMaker g;
    g.g.n_tokens = t;
    g.g.pos0 = pos0;
    const ActId x = g.act(t, n);
    const ActId dst = in_place ? x : g.act(t, n);
    g.op({.kind = OpKind::kEmbed, .dst = x, .w = (*w)[0]});
    g.op(make_op(dst, x, (*w)[1]));
    g.g.logits = dst;
    return g.g;
  };
  c.steps = {nt};
  return c;
}

std::vector<OpCase> make_cases() {
  std::vector<OpCase> cases;
  // Input tables hold 64 rows: token t selects row t.
  for (int64_t n : {64, 256, 1000}) {
    for (int64_t nt : {1, 7}) {
      cases.push_back(row_weight_case("rms_norm_" + std::to_string(n) + "x" + std::to_string(nt), n, n, nt, false,
                                      [](ActId dst, ActId x, hal::WeightId w) {
                                        return hal::Op{.kind = OpKind::kRmsNorm, .dst = dst, .a = x, .w = w, .eps = 1e-5f};
                                      }));
    }
  }
  // qwen3's q/k norms: each head slice of a row normalized on its own, in place.
  for (const auto& pair : {std::pair<int32_t, int64_t>{4, 96}, {2, 128}, {5, 64}}) {
    const int32_t n_head = pair.first;
    const int64_t head_dim = pair.second;
    for (int64_t nt : {1, 7}) {
      cases.push_back(row_weight_case(
          "head_norm_" + std::to_string(n_head) + "x" + std::to_string(head_dim) + "_t" + std::to_string(nt),
          n_head * head_dim, head_dim, nt, true, [n_head](ActId dst, ActId x, hal::WeightId w) {
            return hal::Op{.kind = OpKind::kRmsNorm, .dst = dst, .a = x, .w = w, .n_head = n_head, .eps = 1e-6f};
          }));
    }
  }
  // Linear biases (qwen2): one row added to every token's row.
  for (int64_t n : {64, 1000}) {
    for (int64_t nt : {1, 7}) {
      cases.push_back(row_weight_case("bias_" + std::to_string(n) + "_t" + std::to_string(nt), n, n, nt, true,
                                      [](ActId dst, ActId, hal::WeightId w) {
                                        return hal::Op{.kind = OpKind::kBias, .dst = dst, .w = w};
                                      }));
    }
  }
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    for (const auto& pair : {std::pair<int64_t, int64_t>{256, 96}, {512, 37}, {768, 256}}) {
      // Locals, not structured bindings: clang 14 does not capture bindings in lambdas.
      const auto k = pair.first;
      const auto rows = pair.second;
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
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    for (const auto& pair : {std::pair<int64_t, int64_t>{64, 33}, {256, 512}}) {
      // Locals, not structured bindings: clang 14 does not capture bindings in lambdas.
      const auto k = pair.first;
      const auto rows = pair.second;
      for (int64_t nt : {1, 7}) cases.push_back(scaled_matmul_case(type, k, rows, nt, std::make_shared<std::array<hal::WeightId, 3>>()));
    }
  }
  // llama.cpp's block formats: OpenCL and CUDA dequantize them in the kernel
  // against float activations; the CPU and (by default) Vulkan dot them with 8-bit activations
  // (see block_matmul_bounds).
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ4_K,
                        GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kIQ4_NL,
                        GgmlType::kIQ4_XS}) {
    const bool k_quant = !ggml_tensor_n_bytes(type, 32).ok();  // 256-element super-blocks
    const std::vector<std::pair<int64_t, int64_t>> shapes =
        k_quant ? std::vector<std::pair<int64_t, int64_t>>{{256, 33}, {768, 128}}
                : std::vector<std::pair<int64_t, int64_t>>{{64, 33}, {256, 512}, {576, 96}};
    for (const auto& pair : shapes) {
      // Locals, not structured bindings: clang 14 does not capture bindings in lambdas.
      const auto k = pair.first;
      const auto rows = pair.second;
      for (int64_t nt : {1, 7}) {
        auto w = std::make_shared<std::array<hal::WeightId, 3>>();
        OpCase c = scaled_matmul_case(type, k, rows, nt, w);
        c.abs_tol = [=](const Weights& ws, const std::vector<int32_t>& tokens) {
          const auto& t = ws.table;
          return block_matmul_bounds(type, t[static_cast<size_t>((*w)[0])], t[static_cast<size_t>((*w)[1])],
                                     t[static_cast<size_t>((*w)[2])], tokens);
        };
        c.others_may_refuse = true;
        cases.push_back(c);
      }
    }
    // embed: the dequantized rows, on every backend.
    OpCase e = embed_case(type, 256);
    e.rel_tol = 0.0;
    e.others_may_refuse = true;
    cases.push_back(e);
  }
  cases.push_back(embed_case(GgmlType::kF16, 128));  // Q8_0 with the block formats above
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
  for (const auto& pair : {std::pair<int32_t, int32_t>{4, 1}, {4, 2}, {4, 4}}) {
    // Locals, not structured bindings: clang 14 does not capture bindings in lambdas.
    const auto n_head = pair.first;
    const auto n_head_kv = pair.second;
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
    if (p.backend == "cpu" || (!kOnlyBackend.empty() && p.backend != kOnlyBackend)) continue;
    // CUDA and HIP keep an F16 KV cache: each runs in its own build of this test, against an F16
    // reference.
    if (kOnlyBackend.empty() && f16_kv_backend(p.backend)) continue;
    if (!p.available) {
      why_none += p.backend + ": " + (p.compiled ? p.reason : "not compiled in") + "; ";
      continue;
    }
    for (const hal::DeviceInfo& d : p.devices) out.push_back(d);
  }
  return out;
}

// Runs `c` on `b` (fresh weights and KV), returning each step's output. With `refused`, a
// kUnsupported step stops the run and is returned there instead of failing.
std::vector<std::vector<float>> run_case(hal::Backend& b, const OpCase& c, const Weights& w, Status* refused = nullptr) {
  std::vector<std::vector<float>> outs;
  EXPECT_TRUE(b.load_weights(w.table).ok());
  const int64_t n_embd_kv = c.n_embd_kv > 0 ? c.n_embd_kv : 1;
  EXPECT_TRUE(b.init_kv({c.n_layer, c.n_ctx, n_embd_kv, kKvType}).ok());
  int64_t pos = 0;
  for (int64_t n : c.steps) {
    const hal::Graph g = c.graph(pos, n);
    const std::vector<int32_t> tokens = step_tokens(pos, n);
    const hal::ActDesc& out = g.acts[static_cast<size_t>(g.logits)];
    std::vector<float> y(static_cast<size_t>(out.n_rows * out.n_cols));
    const Status s = b.compute(g, tokens, y);
    if (refused != nullptr && s.code() == StatusCode::kUnsupported) {
      *refused = s;
      return outs;
    }
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
  if (devices.empty()) {
    GTEST_SKIP() << "no runnable " << (kOnlyBackend.empty() ? "backend besides the CPU" : std::string(kOnlyBackend) + " device")
                 << " (" << why_none << ")";
  }
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
    if (c.others_may_refuse && d.backend != "opencl") {
      const Status loaded = (*backend)->load_weights(w.table);
      if (loaded.code() == StatusCode::kUnsupported) {
        std::printf("[ SKIPPED  ] %s on %s: %s\n", c.name.c_str(), d.id.c_str(), loaded.to_string().c_str());
        continue;
      }
    }
    Status refused;
    const auto got = run_case(**backend, c, w, f16_kv_backend(d.backend) ? &refused : nullptr);
    if (!refused.ok()) {
      std::printf("[ SKIPPED  ] %s on %s: %s\n", c.name.c_str(), d.id.c_str(), refused.to_string().c_str());
      continue;
    }
    ASSERT_EQ(got.size(), want.size());
    int64_t pos = 0;
    for (size_t s = 0; s < want.size(); ++s) {
      ASSERT_EQ(got[s].size(), want[s].size());
      const int64_t n_tokens = c.steps[s];
      if (c.abs_tol) {
        const std::vector<double> bound = c.abs_tol(w, step_tokens(pos, n_tokens));
        ASSERT_EQ(bound.size(), want[s].size());
        double worst = 0.0;  // max |diff| / bound
        size_t worst_i = 0;
        for (size_t i = 0; i < want[s].size(); ++i) {
          const double ratio = std::abs(static_cast<double>(got[s][i]) - want[s][i]) / bound[i];
          if (!(ratio <= worst)) {
            worst = std::isnan(ratio) ? 1e30 : ratio;
            worst_i = i;
          }
        }
        std::printf("%s on %s step %zu: max |diff| / bound %.3g\n", c.name.c_str(), d.id.c_str(), s, worst);
        EXPECT_LE(worst, 1.0) << d.id << " step " << s << " element " << worst_i << ": " << got[s][worst_i] << " vs cpu "
                              << want[s][worst_i] << ", bound " << bound[worst_i];
        pos += n_tokens;
        continue;
      }
      pos += n_tokens;
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

// A paged KV cache (hal::KvMap): two sequences in blocks of 8 positions, scattered over the
// cache, run in the same steps with their tokens interleaved, give each token the output it
// gets when its sequence runs alone in a plain cache. Rope (per-token positions), store_kv and
// attention, on the CPU (scalar and the best set) and every runnable GPU backend.
struct Token {
  int seq;
  int32_t pos;
};

// Head size of the paged test: 64, which every GPU backend's attention takes.
constexpr int32_t kPagedDim = 64;

hal::Graph paged_graph(const std::array<hal::WeightId, 3>& w, std::span<const Token> tokens,
                       const std::vector<std::vector<int32_t>>& tables, bool alone, int64_t pos0) {
  constexpr int32_t kHeads = 4, kHeadsKv = 2, kDim = kPagedDim;
  GraphMaker m;
  const auto t = static_cast<int64_t>(tokens.size());
  m.g.n_tokens = t;
  m.g.pos0 = pos0;
  m.g.rope = {hal::RopeStyle::kNeox, kDim, 10000.0f, 1.0f};
  m.g.attn = {kHeads, kHeadsKv, kDim, 1.0f / std::sqrt(static_cast<float>(kDim))};
  if (!alone) {
    std::vector<int32_t> begin;
    for (const auto& table : tables) {
      begin.push_back(static_cast<int32_t>(m.g.kv.tables.size()));
      m.g.kv.tables.insert(m.g.kv.tables.end(), table.begin(), table.end());
    }
    for (const Token& tok : tokens) {
      m.g.kv.pos.push_back(tok.pos);
      m.g.kv.table_begin.push_back(begin[static_cast<size_t>(tok.seq)]);
    }
  }
  const ActId q = m.act(t, kHeads * kDim), k = m.act(t, kHeadsKv * kDim), v = m.act(t, kHeadsKv * kDim),
              y = m.act(t, kHeads * kDim);
  m.op({.kind = OpKind::kEmbed, .dst = q, .w = w[0]});
  m.op({.kind = OpKind::kEmbed, .dst = k, .w = w[1]});
  m.op({.kind = OpKind::kEmbed, .dst = v, .w = w[2]});
  m.op({.kind = OpKind::kRope, .dst = q, .n_head = kHeads});
  m.op({.kind = OpKind::kRope, .dst = k, .n_head = kHeadsKv});
  m.op({.kind = OpKind::kStoreKv, .a = k, .b = v, .il = 0});
  m.op({.kind = OpKind::kAttention, .dst = y, .a = q, .il = 0});
  m.g.logits = y;
  return m.g;
}

int32_t token_id(const Token& t) { return (t.pos * (t.seq == 0 ? 3 : 5) + 1 + t.seq) % 64; }

TEST(PagedKv, TwoSequencesInOneStepEqualEachAlone) {
  std::mt19937 rng(77);
  Weights w;
  std::array<hal::WeightId, 3> ids{};
  ids[0] = w.add_f32(4 * kPagedDim, 64, rng);
  ids[1] = w.add_f32(2 * kPagedDim, 64, rng);
  ids[2] = w.add_f32(2 * kPagedDim, 64, rng);
  const std::vector<std::vector<int32_t>> tables = {{5, 2}, {0, 7}};  // sequence 0: 13 positions, 1: 10
  // Two steps, the sequences' tokens interleaved.
  std::vector<std::vector<Token>> steps(2);
  for (int32_t p = 0; p < 13; ++p) steps[p < 9 ? 0 : 1].push_back({0, p});
  for (int32_t p = 0; p < 10; ++p) steps[p < 5 ? 0 : 1].insert(steps[p < 5 ? 0 : 1].begin() + 2 * (p % 5), Token{1, p});
  constexpr int64_t kRow = 4 * kPagedDim;

  std::vector<std::pair<std::string, std::unique_ptr<hal::Backend>>> backends;
  std::string why_none;
  const std::vector<hal::DeviceInfo> gpus = runnable_gpu_devices(why_none);
  if (!kOnlyBackend.empty() && gpus.empty()) GTEST_SKIP() << "no " << kOnlyBackend << " device (" << why_none << ")";
  backends.emplace_back("cpu-scalar", cpu::make_cpu_backend({1, "scalar"}));
  backends.emplace_back("cpu", cpu::make_cpu_backend({2, ""}));
  for (const hal::DeviceInfo& d : gpus) {
    auto b = hal::create_backend(d, {1, ""});
    ASSERT_TRUE(b.ok()) << d.id << ": " << b.status().to_string();
    backends.emplace_back(d.id, std::move(*b));
  }
  if (!why_none.empty()) std::printf("GPU backends not run here: %s\n", why_none.c_str());
  for (auto& [name, b] : backends) {
    // Each sequence alone, in a plain cache from row 0.
    std::map<std::pair<int, int32_t>, std::vector<float>> alone;
    for (int seq = 0; seq < 2; ++seq) {
      ASSERT_TRUE(b->load_weights(w.table).ok());
      ASSERT_TRUE(b->init_kv({1, 64, 2 * kPagedDim, kKvType}).ok());
      for (const auto& step : steps) {
        std::vector<Token> mine;
        for (const Token& t : step) if (t.seq == seq) mine.push_back(t);
        const hal::Graph g = paged_graph(ids, mine, tables, true, mine.front().pos);
        std::vector<int32_t> tok;
        for (const Token& t : mine) tok.push_back(token_id(t));
        std::vector<float> y(mine.size() * kRow);
        const Status s = b->compute(g, tok, y);
        ASSERT_TRUE(s.ok()) << name << ": " << s.to_string();
        for (size_t i = 0; i < mine.size(); ++i) alone[{seq, mine[i].pos}].assign(y.begin() + i * kRow, y.begin() + (i + 1) * kRow);
      }
    }
    // Both at once, paged.
    ASSERT_TRUE(b->load_weights(w.table).ok());
    ASSERT_TRUE(b->init_kv({1, 64, 2 * kPagedDim, kKvType, 8}).ok());
    double worst = 0.0;
    for (const auto& step : steps) {
      const hal::Graph g = paged_graph(ids, step, tables, false, 0);
      std::vector<int32_t> tok;
      for (const Token& t : step) tok.push_back(token_id(t));
      std::vector<float> y(step.size() * kRow);
      const Status s = b->compute(g, tok, y);
      ASSERT_TRUE(s.ok()) << name << ": " << s.to_string();
      for (size_t i = 0; i < step.size(); ++i) {
        const std::vector<float>& want = alone[{step[i].seq, step[i].pos}];
        for (int64_t j = 0; j < kRow; ++j) {
          worst = std::max(worst, std::abs(static_cast<double>(y[i * kRow + j]) - want[static_cast<size_t>(j)]));
        }
      }
    }
    std::printf("%s: paged two-sequence steps vs each alone: max |diff| %.3g\n", name.c_str(), worst);
    EXPECT_LE(worst, 1e-6) << name;
  }
}

}  // namespace
}  // namespace bitnet
