// Backend::compute_top on the OpenCL device (kernels/top_k.cl, the CUDA backend's radix
// select) against hal::select_top of the same backend's whole rows (hal/top_testing.h's rows,
// fed to the logits by kEmbed of an F32 table).
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/opencl/cl_test_util.h"
#include "hal/top_testing.h"

namespace bitnet::opencl::test {
namespace {

TEST(OpenclTopK, SelectsWhatTheHostSelects) {
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  const int64_t n_rows = hal::testing::kTopTestRows, n_cols = 20000;
  WeightTable table(1);
  const hal::WeightId w = table.add_values(GgmlType::kF32, n_rows, n_cols, hal::testing::top_test_rows(n_cols));
  hal::Graph g;
  g.n_tokens = n_rows;
  const hal::ActId x = add_act(g, "logits", n_rows, n_cols);
  g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = x, .w = w});
  g.logits = x;
  ASSERT_TRUE(cl->load_weights(table.descs()).ok());
  ASSERT_TRUE(cl->init_kv({1, 32, 16}).ok());
  const std::vector<int32_t> tokens = {0, 1, 2, 3, 4};
  std::vector<float> logits(static_cast<size_t>(n_rows * n_cols));
  ASSERT_TRUE(cl->compute(g, tokens, logits).ok());
  const std::vector<hal::TopRequest> req = hal::testing::top_test_requests(n_cols);
  std::vector<std::vector<hal::TokenLogit>> got;
  const Status s = cl->compute_top(g, tokens, req, got);
  ASSERT_TRUE(s.ok()) << s.to_string();
  hal::testing::expect_top_matches(logits, n_cols, req, got);
  const std::vector<std::string> used = cl->kernels_used();
  EXPECT_NE(std::find(used.begin(), used.end(), "opencl:top_k_rows"), used.end());
  EXPECT_EQ(cl->compute_top(g, tokens, std::vector<hal::TopRequest>(2), got).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bitnet::opencl::test
