// The 8-bit activation path of the block formats on OpenCL (ClOptions::quant_dot:
// kernels/matmul_q8.cl, quantize_q8_0/1/k + matmul_<type>_q8) for every block format (Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS):
//  - equal to the CPU backend (scalar set: ggml's quantizers and vec_dot) bit for bit: the
//    integer sums are exact and the float steps are the CPU's, one rounding each;
//  - within the activation-quantization error of the double dot of the dequantized weights
//    with the float activations (backend_test::q8_reference);
// on odd shapes: several blocks, odd row counts, 1 and several tokens (tiles of 4 and a
// remainder), and weights split into row chunks by a small allocation limit.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/block_quant_test_util.h"
#include "backends/opencl/cl_test_util.h"

namespace bitnet::opencl::test {
namespace {

using backend_test::block_elems;
using backend_test::lower_name;
using backend_test::uses;

using DotCase = backend_test::BlockDotCase;

class OpenclBlockQuantDot : public testing::TestWithParam<DotCase> {};

TEST_P(OpenclBlockQuantDot, EqualsCpuAndDequantizedDotWithinActivationError) {
  const DotCase c = GetParam();
  WeightTable table(43);
  constexpr int64_t kInputRows = 16;
  const auto [xs, v] = backend_test::block_dot_data(table.rng(), c, kInputRows);
  table.add_values(GgmlType::kF32, kInputRows, c.n_cols, xs);
  const std::vector<uint8_t> wbytes = quant::quantize(c.type, v.data(), c.n_rows, c.n_cols).value();
  const std::vector<float> wdq = backend_test::dequantized(c.type, wbytes, c.n_rows * c.n_cols);
  if (c.limit > 0) {
    ASSERT_GT(wbytes.size(), c.limit) << "the weight would not be split";
  }
  const hal::WeightId w = table.add_bytes(c.type, c.n_rows, c.n_cols, wbytes);
  const hal::Graph g = backend_test::embed_matmul_graph(c.n_tokens, c.n_cols, c.n_rows, 0, w);
  const std::vector<int32_t> tokens = backend_test::block_dot_tokens(c.n_tokens, kInputRows);
  std::vector<const float*> x_rows;
  for (int32_t t : tokens) x_rows.push_back(xs.data() + t * c.n_cols);
  const size_t n_out = static_cast<size_t>(c.n_tokens * c.n_rows);

  std::vector<float> want(n_out, -12345.0f);
  {
    auto cpu = cpu::make_cpu_backend({1, "scalar"});
    ASSERT_TRUE(cpu->load_weights(table.descs()).ok());
    ASSERT_TRUE(cpu->init_kv({1, 32, 8}).ok());
    const Status s = cpu->compute(g, tokens, want);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  const backend_test::Q8Reference ref = backend_test::q8_reference(c.type, wbytes, wdq, c.n_rows, c.n_cols, x_rows);

  ClOptions o;
  o.max_alloc_bytes = c.limit;
  BITNET_CL_BACKEND_OR_SKIP(cl, o);
  const Status loaded = cl->load_weights(table.descs());
  ASSERT_TRUE(loaded.ok()) << loaded.to_string();
  ASSERT_TRUE(cl->init_kv({1, 32, 8}).ok());
  std::vector<float> got(n_out, -12345.0f);
  const Status s = cl->compute(g, tokens, got);
  ASSERT_TRUE(s.ok()) << s.to_string();
  backend_test::expect_bits_and_bound("opencl", c.type, got, want, ref);
  const std::string name = lower_name(c.type);
  const std::vector<std::string> used = cl->kernels_used();
  const bool int_kernel = uses(*cl, fmt::format("opencl:matmul_{}_int", name));
  const bool dot_kernel = uses(*cl, fmt::format("opencl:matmul_{}_dot", name));
  EXPECT_TRUE(int_kernel != dot_kernel) << fmt::format("{}", fmt::join(used, " "));
  EXPECT_FALSE(uses(*cl, "opencl:matmul_" + name));
  EXPECT_TRUE(uses(*cl, std::string("opencl:") + backend_test::q8_quantizer(c.type)));
}

// 71 rows split into row chunks by an allocation limit (the weight is larger than that).
INSTANTIATE_TEST_SUITE_P(Types, OpenclBlockQuantDot, testing::ValuesIn(backend_test::block_dot_cases(71, 512)),
                         [](const auto& p) { return backend_test::block_dot_case_name(p.param); });

// ClOptions::quant_dot = false keeps these types on the float path (matmul_quant.cl).
TEST(OpenclBlockQuantDot, OptionOffUsesFloatPath) {
  WeightTable table(44);
  const hal::WeightId xt = table.add_float(GgmlType::kF32, 4, 64);
  const hal::WeightId w = table.add_values(GgmlType::kQ4_1, 5, 64, std::vector<float>(5 * 64, 0.25f));
  const hal::Graph g = backend_test::embed_matmul_graph(2, 64, 5, xt, w);
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{.quant_dot = false});
  ASSERT_TRUE(cl->load_weights(table.descs()).ok());
  ASSERT_TRUE(cl->init_kv({1, 8, 8}).ok());
  const std::vector<int32_t> tokens = {0, 3};
  std::vector<float> out(10);
  ASSERT_TRUE(cl->compute(g, tokens, out).ok());
  EXPECT_TRUE(uses(*cl, "opencl:matmul_q4_1"));
  EXPECT_FALSE(uses(*cl, "opencl:quantize_q8_1"));
  EXPECT_FALSE(uses(*cl, "opencl:matmul_q4_1_int"));
}

}  // namespace
}  // namespace bitnet::opencl::test
