// llama.cpp's block formats on the OpenCL backend (Q4_0 .. Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS;
// kernels/matmul_quant.cl): the file's blocks are uploaded unchanged and dequantized in the
// kernels. Checked against quant::dequantize, not against the CPU backend: the CPU dots these
// types with 8-bit activations (llama.cpp's vec_dot), the float path (ClOptions::quant_dot =
// false, tested here) with float ones; the 8-bit path is cl_quant_dot_test.cpp's.
//  - embed of every row equals quant::dequantize bit for bit (random block bytes: every code,
//    scale and sign bit pattern), also with rows split into chunks by a small allocation limit;
//  - matmul against float activations is the double dot of the dequantized rows within the
//    float rounding of an n-term sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>

#include "backends/block_quant_test_util.h"
#include "backends/opencl/cl_test_util.h"
#include "core/fp16.h"
#include "quant/test_util.h"

namespace bitnet::opencl::test {
namespace {

constexpr GgmlType kBlockTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                                    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ2_K,
                                    GgmlType::kQ3_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS};

using backend_test::block_elems;
using backend_test::dequantized;
using backend_test::lower_name;
using backend_test::uses;

hal::Graph one_op_graph(int64_t n_tokens) {
  hal::Graph g;
  g.n_tokens = n_tokens;
  return g;
}

class OpenclBlockDecode : public testing::TestWithParam<GgmlType> {};

// embed of every row equals quant::dequantize of the tensor, bit for bit: 64 rows, 4 tokens a
// step, once with the tensor in one buffer and once split into row chunks by an allocation
// limit of one step's activation (the weight is 1.3-2.3x that).
TEST_P(OpenclBlockDecode, EmbedEqualsDequantize) {
  const GgmlType type = GetParam();
  const int64_t n_cols = 3 * block_elems(type), n_rows = 64, n_tokens = 4;
  WeightTable table(41);
  std::vector<uint8_t> bytes = quant::testing::random_blocks(type, n_rows * n_cols, table.rng());
  const std::vector<float> want = dequantized(type, bytes, n_rows * n_cols);
  ASSERT_GT(bytes.size(), static_cast<size_t>(n_tokens * n_cols * 4));
  const hal::WeightId w = table.add_bytes(type, n_rows, n_cols, std::move(bytes));
  hal::Graph g = one_op_graph(n_tokens);
  const hal::ActId x = add_act(g, "x", n_tokens, n_cols);
  g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = x, .w = w});
  g.logits = x;
  for (uint64_t max_alloc : {uint64_t{0}, static_cast<uint64_t>(n_tokens * n_cols * 4)}) {
    SCOPED_TRACE(max_alloc);
    ClOptions o;
    o.max_alloc_bytes = max_alloc;
    BITNET_CL_BACKEND_OR_SKIP(cl, o);
    const Status loaded = cl->load_weights(table.descs());
    ASSERT_TRUE(loaded.ok()) << loaded.to_string();
    ASSERT_TRUE(cl->init_kv({1, 8, 8}).ok());
    int64_t mismatches = 0;
    for (int64_t step = 0; step < n_rows / n_tokens; ++step) {
      std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
      for (int64_t t = 0; t < n_tokens; ++t) tokens[static_cast<size_t>(t)] = static_cast<int32_t>(n_rows - 1 - (step * n_tokens + t));
      std::vector<float> y(static_cast<size_t>(n_tokens * n_cols), -12345.0f);
      const Status s = cl->compute(g, tokens, y);
      ASSERT_TRUE(s.ok()) << s.to_string();
      for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t r = tokens[static_cast<size_t>(t)];
        for (int64_t k = 0; k < n_cols; ++k) {
          const float got = y[static_cast<size_t>(t * n_cols + k)];
          const float ref = want[static_cast<size_t>(r * n_cols + k)];
          if (std::memcmp(&got, &ref, 4) != 0 && mismatches++ < 5) {
            ADD_FAILURE() << ggml_type_name(type) << " row " << r << " element " << k << ": opencl " << got
                          << " dequantize " << ref;
          }
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
    EXPECT_TRUE(uses(*cl, "opencl:embed_" + lower_name(type)));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, OpenclBlockDecode, testing::ValuesIn(kBlockTypes),
                         [](const auto& p) { return std::string(ggml_type_name(p.param)); });

struct QuantMatmulCase {
  GgmlType type;
  int64_t n_rows, n_cols, n_tokens;
};

class OpenclBlockMatmul : public testing::TestWithParam<QuantMatmulCase> {};

// y = W x with float activations: the double dot of the dequantized rows, within the rounding
// of a float sum of n terms in 8 interleaved accumulators (n / 8 + 8 roundings of 2^-24 of
// sum |w x|).
TEST_P(OpenclBlockMatmul, MatchesDequantizedReference) {
  const QuantMatmulCase c = GetParam();
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{.quant_dot = false});
  WeightTable table(42);
  constexpr int64_t kInputRows = 16;
  const hal::WeightId xt = table.add_float(GgmlType::kF32, kInputRows, c.n_cols);
  std::vector<float> xs(static_cast<size_t>(kInputRows * c.n_cols));
  {
    const hal::WeightDesc& d = table.descs()[static_cast<size_t>(xt)];
    std::memcpy(xs.data(), d.bytes.data(), xs.size() * 4);
  }
  std::normal_distribution<float> nd(0.0f, 0.5f);
  std::vector<float> v(static_cast<size_t>(c.n_rows * c.n_cols));
  for (float& f : v) f = nd(table.rng());
  std::vector<uint8_t> bytes = quant::quantize(c.type, v.data(), c.n_rows, c.n_cols).value();
  const std::vector<float> wdq = dequantized(c.type, bytes, c.n_rows * c.n_cols);
  const hal::WeightId w = table.add_bytes(c.type, c.n_rows, c.n_cols, std::move(bytes));
  hal::Graph g = one_op_graph(c.n_tokens);
  const hal::ActId x = add_act(g, "x", c.n_tokens, c.n_cols);
  const hal::ActId y = add_act(g, "y", c.n_tokens, c.n_rows);
  g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = x, .w = xt});
  g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = y, .a = x, .w = w});
  g.logits = y;
  std::vector<int32_t> tokens(static_cast<size_t>(c.n_tokens));
  for (int64_t t = 0; t < c.n_tokens; ++t) tokens[static_cast<size_t>(t)] = static_cast<int32_t>((3 * t + 1) % kInputRows);
  const Status loaded = cl->load_weights(table.descs());
  ASSERT_TRUE(loaded.ok()) << loaded.to_string();
  ASSERT_TRUE(cl->init_kv({1, 32, 8}).ok());
  std::vector<float> out(static_cast<size_t>(c.n_tokens * c.n_rows), -12345.0f);
  const Status s = cl->compute(g, tokens, out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  const double rounding = static_cast<double>(c.n_cols / 8 + 8) * 0x1p-24;
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    const float* xr = xs.data() + tokens[static_cast<size_t>(t)] * c.n_cols;
    for (int64_t r = 0; r < c.n_rows; ++r) {
      double ref = 0.0, mag = 0.0;
      for (int64_t k = 0; k < c.n_cols; ++k) {
        const double p = static_cast<double>(wdq[static_cast<size_t>(r * c.n_cols + k)]) * xr[k];
        ref += p;
        mag += std::fabs(p);
      }
      EXPECT_NEAR(out[static_cast<size_t>(t * c.n_rows + r)], ref, rounding * mag + 1e-30)
          << ggml_type_name(c.type) << " token " << t << " row " << r;
    }
  }
  EXPECT_TRUE(uses(*cl, "opencl:matmul_" + lower_name(c.type)));
}

std::vector<QuantMatmulCase> matmul_cases() {
  std::vector<QuantMatmulCase> cases;
  for (GgmlType t : kBlockTypes) {
    const int64_t b = block_elems(t);
    cases.push_back({t, 37, b == 32 ? 96 : 512, 7});
    cases.push_back({t, 3, b == 32 ? 576 : 1024, 1});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Types, OpenclBlockMatmul, testing::ValuesIn(matmul_cases()), [](const auto& p) {
  const QuantMatmulCase& c = p.param;
  return fmt::format("{}_{}x{}_t{}", ggml_type_name(c.type), c.n_rows, c.n_cols, c.n_tokens);
});

}  // namespace
}  // namespace bitnet::opencl::test
