// The 8-bit activation path of the block formats on Vulkan (VulkanOptions::quant_dot:
// shaders/quantize_q8.comp + matmul_quant.comp) for every block format (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS), with OpSDot (int8_dot, where the device has it) and with plain integer multiplies:
//  - equal to the CPU backend (scalar set: ggml's quantizers and vec_dot) bit for bit: the
//    integer sums are exact and the float steps are the CPU's, one correctly rounded Vulkan
//    add or multiply each (`precise`);
//  - within the activation-quantization error of the double dot of the dequantized weights
//    with the float activations (per activation block: |x - q d| <= d (1/2 + 127 * 2^-11)
//    with d = max|x| / 127 over the activation block (32, or 256 for the K formats and
//    IQ4_XS), the fp16 rounding of d included; Q4_1/Q5_1 also the fp16 rounding
//    of s = d * sum q times |m|), plus float rounding;
// on odd shapes: several blocks, rows not a multiple of the workgroup (64), 1 and several
// tokens (tiles of 4 and a remainder), and weights split into row chunks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_quant_test_util.h"
#include "backends/vulkan/vk_test_util.h"

namespace bitnet::vulkan::test {
namespace {

using DotCase = backend_test::BlockDotCase;

class VulkanBlockQuantDot : public testing::TestWithParam<DotCase> {};

TEST_P(VulkanBlockQuantDot, EqualsCpuAndDequantizedDotWithinActivationError) {
  const DotCase c = GetParam();
  WeightTable table(43);
  constexpr int64_t kInputRows = 16;
  const auto [xs, v] = backend_test::block_dot_data(table.rng(), c, kInputRows);
  {
    std::vector<uint8_t> xb(xs.size() * 4);
    std::memcpy(xb.data(), xs.data(), xb.size());
    table.add_bytes(GgmlType::kF32, kInputRows, c.n_cols, std::move(xb));
  }
  std::vector<uint8_t> bytes = quant::quantize(c.type, v.data(), c.n_rows, c.n_cols).value();
  const std::vector<float> wdq = dequantized(c.type, bytes, c.n_rows * c.n_cols);
  const std::vector<uint8_t> wbytes = bytes;
  const hal::WeightId w = table.add_bytes(c.type, c.n_rows, c.n_cols, std::move(bytes));
  const hal::Graph g = backend_test::embed_matmul_graph(c.n_tokens, c.n_cols, c.n_rows, 0, w);
  const std::vector<int32_t> tokens = backend_test::block_dot_tokens(c.n_tokens, kInputRows);
  const size_t n_out = static_cast<size_t>(c.n_tokens * c.n_rows);

  std::vector<float> want(n_out, -12345.0f);
  {
    auto cpu = cpu_reference();
    ASSERT_TRUE(cpu->load_weights(table.descs()).ok());
    ASSERT_TRUE(cpu->init_kv({1, 32, 8}).ok());
    const Status s = cpu->compute(g, tokens, want);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }

  // The activation-quantization bound against the dequantized double dot.
  std::vector<const float*> x_rows;
  for (int32_t t : tokens) x_rows.push_back(xs.data() + t * c.n_cols);
  const backend_test::Q8Reference q8ref = backend_test::q8_reference(c.type, wbytes, wdq, c.n_rows, c.n_cols, x_rows);

  const auto devices = probe().devices;
  const bool device_dot = !devices.empty() && devices[0].int8_dot;
  for (bool int8_dot : {true, false}) {
    SCOPED_TRACE(int8_dot ? "int8_dot" : "plain integer");
    VulkanOptions o;
    o.int8_dot = int8_dot;
    o.max_binding_bytes = c.limit;
    BITNET_VK_BACKEND_OR_SKIP(vk, o);
    const Status loaded = vk->load_weights(table.descs());
    ASSERT_TRUE(loaded.ok()) << loaded.to_string();
    ASSERT_TRUE(vk->init_kv({1, 32, 8}).ok());
    std::vector<float> got(n_out, -12345.0f);
    const Status s = vk->compute(g, tokens, got);
    ASSERT_TRUE(s.ok()) << s.to_string();
    backend_test::expect_bits_and_bound("vulkan", c.type, got, want, q8ref);
    const std::string name = lower_name(c.type);
    EXPECT_TRUE(uses(*vk, fmt::format("vulkan:matmul_{}_{}", name, int8_dot && device_dot ? "dot" : "int")));
    EXPECT_FALSE(uses(*vk, "vulkan:matmul_" + name));
    const char* quantizer = c.type == GgmlType::kQ4_1 || c.type == GgmlType::kQ5_1 ? "vulkan:quantize_q8_1"
                            : block_elems(c.type) == 256                         ? "vulkan:quantize_q8_k"
                                                                                 : "vulkan:quantize_q8_0";
    EXPECT_TRUE(uses(*vk, quantizer));
  }
}

// 70 rows (two workgroups) split into row chunks by a binding limit.
INSTANTIATE_TEST_SUITE_P(Types, VulkanBlockQuantDot, testing::ValuesIn(backend_test::block_dot_cases(70, 256)),
                         [](const auto& p) { return backend_test::block_dot_case_name(p.param); });

// VulkanOptions::quant_dot = false keeps these types on the float path (matmul_float).
TEST(VulkanBlockQuantDot, OptionOffUsesFloatPath) {
  WeightTable table(44);
  const hal::WeightId xt = table.add_float(GgmlType::kF32, 4, 64);
  const hal::WeightId w = table.add_float(GgmlType::kQ4_1, 5, 64);
  const hal::Graph g = backend_test::embed_matmul_graph(2, 64, 5, xt, w);
  BITNET_VK_BACKEND_OR_SKIP(vk, VulkanOptions{.quant_dot = false});
  ASSERT_TRUE(vk->load_weights(table.descs()).ok());
  ASSERT_TRUE(vk->init_kv({1, 8, 8}).ok());
  const std::vector<int32_t> tokens = {0, 3};
  std::vector<float> out(10);
  ASSERT_TRUE(vk->compute(g, tokens, out).ok());
  EXPECT_TRUE(uses(*vk, "vulkan:matmul_q4_1"));
  EXPECT_FALSE(uses(*vk, "vulkan:quantize_q8_1"));
}

}  // namespace
}  // namespace bitnet::vulkan::test
