// Every op of the HAL on the OpenCL backend against the CPU backend: single-op graphs whose
// inputs come from random F32 "input tables" in the weight table, selected by kEmbed.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/opencl/cl_test_util.h"

namespace bitnet::opencl::test {
namespace {

constexpr int64_t kTableRows = 16;

std::vector<int32_t> random_tokens(int64_t n, std::mt19937& rng, int64_t n_rows = kTableRows) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_rows));
  return t;
}

// dst = embed(input table) as the first op: returns the activation id.
hal::ActId input(hal::Graph& g, WeightTable& table, std::string_view name, int64_t n_cols, float sd = 1.0f) {
  const hal::WeightId w = table.add_float(GgmlType::kF32, kTableRows, n_cols, sd);
  const hal::ActId a = add_act(g, name, g.n_tokens, n_cols);
  g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = a, .w = w});
  return a;
}

hal::Graph new_graph(int64_t n_tokens, int64_t pos0 = 0) {
  hal::Graph g;
  g.n_tokens = n_tokens;
  g.pos0 = pos0;
  return g;
}

const hal::KvShape kSmallKv = {1, 32, 16};

std::string type_name(GgmlType t) { return std::string(ggml_type_name(t)); }

// ---- embed -----------------------------------------------------------------------------

class OpenclEmbed : public testing::TestWithParam<std::tuple<GgmlType, int64_t>> {};

TEST_P(OpenclEmbed, MatchesCpu) {
  const auto [type, n_tokens] = GetParam();
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(3);
  const int64_t n_cols = type == GgmlType::kQ8_0 ? 96 : 37;
  const int64_t n_vocab = 23;
  const hal::WeightId w = table.add_float(type, n_vocab, n_cols);
  hal::Graph g = new_graph(n_tokens);
  const hal::ActId x = add_act(g, "x", n_tokens, n_cols);
  g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = x, .w = w});
  g.logits = x;
  compare_with_cpu(*cl, table, kSmallKv, {{g, random_tokens(n_tokens, table.rng(), n_vocab)}}, 0.0, 0.0, "embed");
}

INSTANTIATE_TEST_SUITE_P(Types, OpenclEmbed,
                         testing::Combine(testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0),
                                          testing::Values(int64_t{1}, int64_t{7})),
                         [](const auto& p) {
                           return fmt::format("{}_t{}", type_name(std::get<0>(p.param)), std::get<1>(p.param));
                         });

// ---- rms_norm ----------------------------------------------------------------------------

class OpenclRmsNorm : public testing::TestWithParam<std::tuple<GgmlType, int64_t, int64_t, bool>> {};

TEST_P(OpenclRmsNorm, MatchesCpu) {
  const auto [norm_type, n_tokens, n_cols, in_place] = GetParam();
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(4);
  hal::Graph g = new_graph(n_tokens);
  const hal::ActId x = input(g, table, "x", n_cols, 3.0f);
  const hal::WeightId w = table.add_float(norm_type, 0, n_cols);
  const hal::ActId y = in_place ? x : add_act(g, "y", n_tokens, n_cols);
  g.ops.push_back({.kind = hal::OpKind::kRmsNorm, .dst = y, .a = x, .w = w, .eps = 1e-5f});
  g.logits = y;
  compare_with_cpu(*cl, table, kSmallKv, {{g, random_tokens(n_tokens, table.rng())}}, 2e-6, 1e-6, "rms_norm");
}

INSTANTIATE_TEST_SUITE_P(Shapes, OpenclRmsNorm,
                         testing::Values(std::make_tuple(GgmlType::kF32, int64_t{1}, int64_t{64}, false),
                                         std::make_tuple(GgmlType::kF32, int64_t{7}, int64_t{257}, false),
                                         std::make_tuple(GgmlType::kF16, int64_t{7}, int64_t{100}, true),
                                         std::make_tuple(GgmlType::kBF16, int64_t{3}, int64_t{1000}, true)));

// ---- quantize_act (through an identity ternary matmul: y = q / s) --------------------------

class OpenclQuantizeAct : public testing::TestWithParam<int64_t> {};

TEST_P(OpenclQuantizeAct, MatchesCpu) {
  const int64_t n_tokens = GetParam();
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(5);
  const int64_t n = 128;
  // Rows of the input table: random, all zeros (the 1e-5 floor), exact halves (x * s = k + 0.5
  // with s = 1: half to even), tiny values, and a NaN (skipped by the max, quantized to 0).
  std::vector<float> rows(static_cast<size_t>(kTableRows * n));
  std::normal_distribution<float> d(0.0f, 2.0f);
  for (float& v : rows) v = d(table.rng());
  std::fill_n(rows.begin() + 1 * n, n, 0.0f);
  for (int64_t k = 0; k < n; ++k) rows[static_cast<size_t>(2 * n + k)] = static_cast<float>(k % 9) - 4.5f;
  rows[static_cast<size_t>(2 * n)] = 127.0f;
  for (int64_t k = 0; k < n; ++k) rows[static_cast<size_t>(3 * n + k)] = 1e-7f * static_cast<float>(k - 60);
  rows[static_cast<size_t>(4 * n + 5)] = NAN;
  const hal::WeightId xt = table.add_values(GgmlType::kF32, kTableRows, n, rows);
  std::vector<uint8_t> identity(static_cast<size_t>(n * n), 1);
  for (int64_t r = 0; r < n; ++r) identity[static_cast<size_t>(r * n + r)] = 2;
  const hal::WeightId w = table.add_codes(GgmlType::kI2_S, n, n, identity, 1.0f);

  hal::Graph g = new_graph(n_tokens);
  const hal::ActId x = add_act(g, "x", n_tokens, n);
  const hal::ActId q = add_act(g, "q", n_tokens, n, hal::ActType::kQ8);
  const hal::ActId y = add_act(g, "y", n_tokens, n);
  g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = x, .w = xt});
  g.ops.push_back({.kind = hal::OpKind::kQuantizeAct, .dst = q, .a = x});
  g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = y, .a = q, .w = w});
  g.logits = y;
  std::vector<int32_t> tokens = {0, 1, 2, 3, 4, 5, 6, 7};
  tokens.resize(static_cast<size_t>(n_tokens));
  if (n_tokens == 1) tokens[0] = 2;
  compare_with_cpu(*cl, table, kSmallKv, {{g, tokens}}, 0.0, 0.0, "quantize_act");
}

INSTANTIATE_TEST_SUITE_P(Tokens, OpenclQuantizeAct, testing::Values(int64_t{1}, int64_t{7}));

// ---- matmul ------------------------------------------------------------------------------

struct MatmulCase {
  GgmlType type;
  int64_t n_rows, n_cols, n_tokens;
};

class OpenclMatmul : public testing::TestWithParam<MatmulCase> {};

TEST_P(OpenclMatmul, MatchesCpu) {
  const MatmulCase c = GetParam();
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(6);
  hal::Graph g = new_graph(c.n_tokens);
  const hal::ActId x = input(g, table, "x", c.n_cols);
  const hal::ActId y = add_act(g, "y", c.n_tokens, c.n_rows);
  hal::WeightId w;
  // Integer sums are exact, the float terms of ternary scale blocks are added in the CPU's
  // order, and float rows are dotted in the CPU's accumulator order: identical results.
  const double rtol = 0.0, atol = 0.0;
  if (quant::is_ternary(c.type)) {
    w = table.add_ternary(c.type, c.n_rows, c.n_cols);
    const hal::ActId q = add_act(g, "xq", c.n_tokens, c.n_cols, hal::ActType::kQ8);
    g.ops.push_back({.kind = hal::OpKind::kQuantizeAct, .dst = q, .a = x});
    g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = y, .a = q, .w = w});
  } else {
    w = table.add_float(c.type, c.n_rows, c.n_cols);
    g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = y, .a = x, .w = w});
  }
  g.logits = y;
  compare_with_cpu(*cl, table, kSmallKv, {{g, random_tokens(c.n_tokens, table.rng())}}, rtol, atol,
                   fmt::format("matmul {}", type_name(c.type)));
}

INSTANTIATE_TEST_SUITE_P(
    Types, OpenclMatmul,
    testing::Values(MatmulCase{GgmlType::kF32, 37, 33, 1}, MatmulCase{GgmlType::kF32, 5, 300, 7},
                    MatmulCase{GgmlType::kF16, 37, 65, 7}, MatmulCase{GgmlType::kF16, 1, 256, 1},
                    MatmulCase{GgmlType::kBF16, 37, 130, 7}, MatmulCase{GgmlType::kBF16, 3, 64, 1},
                    MatmulCase{GgmlType::kI2_S, 37, 256, 7}, MatmulCase{GgmlType::kI2_S, 1, 2560, 1},
                    MatmulCase{GgmlType::kI2_S, 67, 128, 1}, MatmulCase{GgmlType::kTQ2_0, 37, 512, 7},
                    MatmulCase{GgmlType::kTQ2_0, 3, 6912, 1}, MatmulCase{GgmlType::kTQ1_0, 37, 256, 7},
                    MatmulCase{GgmlType::kTQ1_0, 5, 1024, 1}),
    [](const auto& p) {
      const MatmulCase& c = p.param;
      return fmt::format("{}_{}x{}_t{}", type_name(c.type), c.n_rows, c.n_cols, c.n_tokens);
    });

// ---- scale, elementwise, copy_rows ------------------------------------------------------------

TEST(OpenclOps, ScaleMatchesCpu) {
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(7);
  for (int64_t n_tokens : {1, 7}) {
    hal::Graph g = new_graph(n_tokens);
    const hal::ActId x = input(g, table, "x", 45);
    const hal::WeightId s = table.add_values(GgmlType::kF32, 0, 1, {0.37f});
    g.ops.push_back({.kind = hal::OpKind::kScale, .dst = x, .w = s});
    g.logits = x;
    compare_with_cpu(*cl, table, kSmallKv, {{g, random_tokens(n_tokens, table.rng())}}, 0.0, 0.0, "scale");
  }
}

class OpenclElementwise : public testing::TestWithParam<std::tuple<hal::OpKind, int64_t, bool>> {};

TEST_P(OpenclElementwise, MatchesCpu) {
  const auto [kind, n_tokens, in_place] = GetParam();
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(8);
  hal::Graph g = new_graph(n_tokens);
  const hal::ActId a = input(g, table, "a", 75, 4.0f);
  const hal::ActId b = input(g, table, "b", 75);
  const hal::ActId y = in_place ? a : add_act(g, "y", n_tokens, 75);
  g.ops.push_back({.kind = kind, .dst = y, .a = a, .b = b});
  g.logits = y;
  // exp() may differ from the host's by a few ulp.
  const double tol = kind == hal::OpKind::kSiluMul ? 1e-6 : 0.0;
  compare_with_cpu(*cl, table, kSmallKv, {{g, random_tokens(n_tokens, table.rng())}}, tol, tol,
                   std::string(hal::op_name(kind)));
}

INSTANTIATE_TEST_SUITE_P(Ops, OpenclElementwise,
                         testing::Combine(testing::Values(hal::OpKind::kSiluMul, hal::OpKind::kRelu2Mul, hal::OpKind::kAdd),
                                          testing::Values(int64_t{1}, int64_t{7}), testing::Bool()),
                         [](const auto& p) {
                           return fmt::format("{}_t{}{}", hal::op_name(std::get<0>(p.param)), std::get<1>(p.param),
                                              std::get<2>(p.param) ? "_inplace" : "");
                         });

TEST(OpenclOps, CopyRowsMatchesCpu) {
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(9);
  for (const auto& [row0, n] : {std::pair<int64_t, int64_t>{6, 1}, {2, 3}, {0, 7}}) {
    hal::Graph g = new_graph(7);
    const hal::ActId x = input(g, table, "x", 29);
    const hal::ActId y = add_act(g, "y", n, 29);
    g.ops.push_back({.kind = hal::OpKind::kCopyRows, .dst = y, .a = x, .row0 = row0});
    g.logits = y;
    compare_with_cpu(*cl, table, kSmallKv, {{g, random_tokens(7, table.rng())}}, 0.0, 0.0, "copy_rows");
  }
}

// ---- rope --------------------------------------------------------------------------------------

class OpenclRope : public testing::TestWithParam<std::tuple<hal::RopeStyle, int32_t, int64_t, int64_t>> {};

TEST_P(OpenclRope, MatchesCpu) {
  const auto [style, n_rot, n_tokens, pos0] = GetParam();
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(10);
  const int32_t n_head = 3, head_dim = 16;
  hal::Graph g = new_graph(n_tokens, pos0);
  g.rope = {style, n_rot, 10000.0f, 1.0f};
  g.attn = {n_head, n_head, head_dim, 0.25f};
  // Rows wider than the rotated heads: rope leaves the rest alone.
  const hal::ActId x = input(g, table, "x", n_head * head_dim + 5);
  g.ops.push_back({.kind = hal::OpKind::kRope, .dst = x, .n_head = n_head});
  g.logits = x;
  // The angles come from the host as the CPU computes them: identical results.
  compare_with_cpu(*cl, table, {1, 4096, 16}, {{g, random_tokens(n_tokens, table.rng())}}, 0.0, 0.0, "rope");
}

INSTANTIATE_TEST_SUITE_P(Styles, OpenclRope,
                         testing::Values(std::make_tuple(hal::RopeStyle::kNorm, 16, int64_t{7}, int64_t{0}),
                                         std::make_tuple(hal::RopeStyle::kNorm, 8, int64_t{1}, int64_t{5}),
                                         std::make_tuple(hal::RopeStyle::kNeox, 16, int64_t{7}, int64_t{3}),
                                         std::make_tuple(hal::RopeStyle::kNeox, 12, int64_t{1}, int64_t{1000}),
                                         std::make_tuple(hal::RopeStyle::kNeox, 16, int64_t{7}, int64_t{3000})));

// ---- store_kv + attention over several steps -----------------------------------------------------

class OpenclAttention : public testing::TestWithParam<std::tuple<int32_t, int32_t, int32_t>> {};

TEST_P(OpenclAttention, MatchesCpuOverSteps) {
  const auto [n_head, n_head_kv, head_dim] = GetParam();
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(11);
  const int64_t n_embd = int64_t{n_head} * head_dim;
  const int64_t n_embd_kv = int64_t{n_head_kv} * head_dim;
  const hal::WeightId qt = table.add_float(GgmlType::kF32, kTableRows, n_embd);
  const hal::WeightId kt = table.add_float(GgmlType::kF32, kTableRows, n_embd_kv);
  const hal::WeightId vt = table.add_float(GgmlType::kF32, kTableRows, n_embd_kv);
  const int32_t n_layer = 2;
  std::vector<Step> steps;
  int64_t pos = 0;
  for (int64_t n_tokens : {7, 1, 3, 1}) {
    for (int32_t il = 0; il < n_layer; ++il) {
      hal::Graph g = new_graph(n_tokens, pos);
      g.attn = {n_head, n_head_kv, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
      const hal::ActId q = add_act(g, "q", n_tokens, n_embd);
      const hal::ActId k = add_act(g, "k", n_tokens, n_embd_kv);
      const hal::ActId v = add_act(g, "v", n_tokens, n_embd_kv);
      const hal::ActId out = add_act(g, "out", n_tokens, n_embd);
      g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = q, .w = qt});
      g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = k, .w = kt});
      g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = v, .w = vt});
      g.ops.push_back({.kind = hal::OpKind::kStoreKv, .a = k, .b = v, .il = il});
      g.ops.push_back({.kind = hal::OpKind::kAttention, .dst = out, .a = q, .il = il});
      g.logits = out;
      steps.push_back({g, random_tokens(n_tokens, table.rng())});
    }
    pos += n_tokens;
  }
  compare_with_cpu(*cl, table, {n_layer, 64, n_embd_kv}, steps, 1e-5, 1e-6, "attention");
}

INSTANTIATE_TEST_SUITE_P(Heads, OpenclAttention,
                         testing::Values(std::make_tuple(8, 2, 20),    // GQA 4:1, head_dim with a tail
                                         std::make_tuple(4, 4, 64),    // 1:1
                                         std::make_tuple(4, 1, 16)),   // all heads share one
                         [](const auto& p) {
                           return fmt::format("h{}_kv{}_d{}", std::get<0>(p.param), std::get<1>(p.param),
                                              std::get<2>(p.param));
                         });

}  // namespace
}  // namespace bitnet::opencl::test
