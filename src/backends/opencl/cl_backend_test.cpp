// The OpenCL backend's own behaviour: probe, weight splitting under a low allocation limit,
// out-of-memory and release_scratch, the buffer pool, kernels_used and error statuses.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>

#include "backends/opencl/cl_backend.h"
#include "backends/opencl/cl_test_util.h"
#include "backends/opencl/cl_weights.h"

namespace bitnet::opencl::test {
namespace {

TEST(OpenclProbe, ReportsDevicesOrWhyNot) {
  const hal::BackendProbe p = probe();
  EXPECT_EQ(p.backend, "opencl");
  EXPECT_TRUE(p.compiled);
  if (!p.available) {
    EXPECT_FALSE(p.reason.empty());
    EXPECT_TRUE(p.devices.empty());
    GTEST_SKIP() << "no OpenCL device: " << p.reason;
  }
  ASSERT_FALSE(p.devices.empty());
  for (size_t i = 0; i < p.devices.size(); ++i) {
    const hal::DeviceInfo& d = p.devices[i];
    EXPECT_EQ(d.backend, "opencl");
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_FALSE(d.api_version.empty());
    EXPECT_GT(d.memory_bytes, 0u);
    EXPECT_GT(d.max_alloc_bytes, 0u);
    EXPECT_GT(d.compute_units, 0);
    EXPECT_TRUE(d.id == "opencl:pocl" || d.id == fmt::format("opencl:{}", i)) << d.id;
    if (d.id == "opencl:pocl" && !d.is_gpu) {
      EXPECT_TRUE(d.is_software);
    }
  }
}

TEST(OpenclBackend, InfoNamesTheDevice) {
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  const hal::BackendInfo info = cl->info();
  EXPECT_EQ(info.name, probe().devices[0].id);
  EXPECT_FALSE(info.device.empty());
  EXPECT_FALSE(make_backend(1000).ok());
}

TEST(OpenclWeights, PackedWordsHoldFourConsecutiveCodesPerShift) {
  std::vector<uint8_t> codes(32);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 7 + i / 5) % 3);
  std::vector<uint32_t> words(2);
  pack_ternary_words(codes.data(), 1, 32, words.data());
  for (int j = 0; j < 2; ++j) {
    for (int i = 0; i < 4; ++i) {
      const uint32_t lanes = (words[static_cast<size_t>(j)] >> (2 * i)) & 0x03030303u;
      for (int b = 0; b < 4; ++b) EXPECT_EQ((lanes >> (8 * b)) & 0xffu, codes[static_cast<size_t>(16 * j + 4 * i + b)]);
    }
  }
}

// A graph of embed (every float type) and matmuls (every type) over weights bigger than a
// 4 KiB allocation limit: each weight is split into row chunks and must still match the CPU.
TEST(OpenclBackend, WeightsAboveTheAllocationLimitAreSplitByRows) {
  ClOptions options;
  options.max_alloc_bytes = 4096;
  BITNET_CL_BACKEND_OR_SKIP(cl, options);
  WeightTable table(20);
  const int64_t n_tokens = 3, n_cols = 256, n_rows = 37;
  hal::Graph g;
  g.n_tokens = n_tokens;
  std::vector<hal::ActId> outs;
  // Q8_0's matmul is the CPU's integer dot on quantized activations (checked against the
  // dequantized reference in cl_quant_test.cpp); its split embed is compared here.
  hal::ActId q8_0_embed = hal::kNone;
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0}) {
    const hal::WeightId emb = table.add_float(type, 40, n_cols);  // 40 rows: tokens land in several chunks
    const hal::ActId x = add_act(g, "x", n_tokens, n_cols);
    g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = x, .w = emb});
    if (type == GgmlType::kQ8_0) {
      q8_0_embed = x;
      continue;
    }
    const hal::WeightId w = table.add_float(type, n_rows, n_cols);
    const hal::ActId y = add_act(g, "y", n_tokens, n_rows);
    g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = y, .a = x, .w = w});
    outs.push_back(y);
  }
  const hal::ActId x = static_cast<hal::ActId>(0);
  const hal::ActId xq = add_act(g, "xq", n_tokens, n_cols, hal::ActType::kQ8);
  g.ops.push_back({.kind = hal::OpKind::kQuantizeAct, .dst = xq, .a = x});
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    const hal::WeightId w = table.add_ternary(type, 150, n_cols);  // 64 B a row: 64 rows a chunk
    const hal::ActId y = add_act(g, "yt", n_tokens, 150);
    g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = y, .a = xq, .w = w});
    outs.push_back(y);
  }
  // Sum every output into one activation per width so that a single logits buffer checks all.
  const hal::ActId sum_f = add_act(g, "sum_f", n_tokens, n_rows);
  const hal::ActId sum_t = add_act(g, "sum_t", n_tokens, 150);
  g.ops.push_back({.kind = hal::OpKind::kAdd, .dst = sum_f, .a = outs[0], .b = outs[1]});
  g.ops.push_back({.kind = hal::OpKind::kAdd, .dst = sum_f, .a = sum_f, .b = outs[2]});
  g.ops.push_back({.kind = hal::OpKind::kAdd, .dst = sum_t, .a = outs[3], .b = outs[4]});
  g.ops.push_back({.kind = hal::OpKind::kAdd, .dst = sum_t, .a = sum_t, .b = outs[5]});
  // Both sums in one output: copy the float sums into the front of a wider buffer is not an
  // op, so check them in two graphs that differ only in the logits.
  const std::vector<int32_t> tokens = {39, 0, 17};
  for (hal::ActId out : {sum_f, sum_t, outs[0], outs[3], q8_0_embed}) {
    g.logits = out;
    compare_with_cpu(*cl, table, {1, 8, 16}, {{g, tokens}}, 0.0, 0.0, "split weights");
  }
  const hal::BackendStats s = cl->stats();
  EXPECT_GT(s.weight_bytes, 0u);
}

// Weight chunks are sized by the limit: a row that alone exceeds it cannot be placed.
TEST(OpenclBackend, ARowAboveTheAllocationLimitIsOutOfMemory) {
  ClOptions options;
  options.max_alloc_bytes = 512;
  BITNET_CL_BACKEND_OR_SKIP(cl, options);
  WeightTable table(21);
  table.add_float(GgmlType::kF32, 2, 256);  // 1 KiB rows
  const Status s = cl->load_weights(table.descs());
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory) << s.to_string();
  // A KV cache layer above the limit is out of memory too.
  const Status kv = cl->init_kv({1, 1024, 64});
  EXPECT_EQ(kv.code(), StatusCode::kOutOfMemory) << kv.to_string();
}

// A small W2A8 MLP: F16 embedding, I2_S up-projection, squared ReLU, F32 down-projection.
struct Mlp {
  explicit Mlp(uint32_t seed) : table(seed) {
    emb = table.add_float(GgmlType::kF16, 32, 128);
    w1 = table.add_ternary(GgmlType::kI2_S, 256, 128);
    w2 = table.add_float(GgmlType::kF32, 32, 256);
  }
  hal::Graph graph(int64_t n_tokens) const {
    hal::Graph g;
    g.n_tokens = n_tokens;
    const hal::ActId x = add_act(g, "x", n_tokens, 128);
    const hal::ActId xq = add_act(g, "xq", n_tokens, 128, hal::ActType::kQ8);
    const hal::ActId h = add_act(g, "h", n_tokens, 256);
    const hal::ActId y = add_act(g, "y", n_tokens, 32);
    g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = x, .w = emb});
    g.ops.push_back({.kind = hal::OpKind::kQuantizeAct, .dst = xq, .a = x});
    g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = h, .a = xq, .w = w1});
    g.ops.push_back({.kind = hal::OpKind::kRelu2Mul, .dst = h, .a = h, .b = h});
    g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = y, .a = h, .w = w2});
    g.logits = y;
    return g;
  }
  WeightTable table;
  hal::WeightId emb, w1, w2;
};

// No F16 attention kernel yet: an F16 request is accepted and kept in F32, which stats() says
// (the engine logs it; the backend itself does not).
TEST(OpenclBackend, AnF16CacheRequestKeepsF32AndSaysSo) {
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  const Mlp mlp(22);
  ASSERT_TRUE(cl->load_weights(mlp.table.descs()).ok());
  ASSERT_TRUE(cl->init_kv({1, 8, 16, hal::KvType::kF16}).ok());
  EXPECT_EQ(cl->stats().kv_type, hal::KvType::kF32);
  EXPECT_EQ(cl->stats().kv_bytes, 2u * 8 * 16 * 4);
}

TEST(OpenclBackend, PoolReusesBuffersAndReleaseScratchFreesThem) {
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  const Mlp mlp(22);
  const WeightTable& table = mlp.table;
  const hal::Graph g = mlp.graph(3);
  ASSERT_TRUE(cl->load_weights(table.descs()).ok());
  ASSERT_TRUE(cl->init_kv({1, 8, 16}).ok());
  std::vector<float> y1(3 * 32), y2(3 * 32);
  const std::vector<int32_t> tokens = {1, 2, 3};
  ASSERT_TRUE(cl->compute(g, tokens, y1).ok());
  const hal::BackendStats s1 = cl->stats();
  EXPECT_GT(s1.pool_allocations, 0u);
  EXPECT_GT(s1.pool_bytes, 0u);
  EXPECT_EQ(s1.kv_bytes, 2u * 8 * 16 * 4);
  EXPECT_EQ(s1.kv_type, hal::KvType::kF32);
  ASSERT_TRUE(cl->compute(g, tokens, y2).ok());
  const hal::BackendStats s2 = cl->stats();
  EXPECT_EQ(s2.pool_allocations, s1.pool_allocations);  // the same sizes again: all reused
  EXPECT_GE(s2.pool_reuses, s1.pool_allocations);
  EXPECT_EQ(y1, y2);
  cl->release_scratch();
  EXPECT_EQ(cl->stats().pool_bytes, 0u);
  EXPECT_EQ(cl->stats().pool_peak_bytes, s2.pool_peak_bytes);
  ASSERT_TRUE(cl->compute(g, tokens, y2).ok());  // allocates again after a release
  EXPECT_EQ(y1, y2);

  const std::vector<std::string> used = cl->kernels_used();
  for (const char* k : {"opencl:embed_f16", "opencl:quantize_act", "opencl:matmul_w2a8", "opencl:relu2_mul_f32",
                        "opencl:matmul_f32"}) {
    EXPECT_NE(std::find(used.begin(), used.end(), k), used.end()) << k;
  }
}

TEST(OpenclBackend, OutOfDeviceMemoryIsAStatusAndRecoverable) {
  const Mlp mlp(23);
  const WeightTable& table = mlp.table;
  const hal::Graph g = mlp.graph(3);
  uint64_t resident = 0;
  {
    BITNET_CL_BACKEND_OR_SKIP(probe_backend, ClOptions{});
    ASSERT_TRUE(probe_backend->load_weights(table.descs()).ok());
    ASSERT_TRUE(probe_backend->init_kv({1, 8, 16}).ok());
    resident = probe_backend->stats().weight_bytes + probe_backend->stats().kv_bytes;
  }
  // Too little for the weights.
  {
    ClOptions options;
    options.memory_budget_bytes = resident / 2;
    BITNET_CL_BACKEND_OR_SKIP(cl, options);
    const Status s = cl->load_weights(table.descs());
    EXPECT_EQ(s.code(), StatusCode::kOutOfMemory) << s.to_string();
  }
  // Enough for weights, cache and a 1-token step (2.75 KiB of activations), not for a
  // 3-token step (6.25 KiB).
  ClOptions options;
  options.memory_budget_bytes = resident + 4096;
  BITNET_CL_BACKEND_OR_SKIP(cl, options);
  ASSERT_TRUE(cl->load_weights(table.descs()).ok());
  ASSERT_TRUE(cl->init_kv({1, 8, 16}).ok());
  std::vector<float> y(3 * 32);
  const std::vector<int32_t> tokens = {1, 2, 3};
  const Status s = cl->compute(g, tokens, y);
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory) << s.to_string();
  cl->release_scratch();
  EXPECT_EQ(cl->stats().pool_bytes, 0u);
  // A smaller step fits after the release: the backend is still usable.
  const hal::Graph g1 = mlp.graph(1);
  std::vector<float> y1(32);
  const std::vector<int32_t> one = {1};
  const Status s1 = cl->compute(g1, one, y1);
  EXPECT_TRUE(s1.ok()) << s1.to_string();
  EXPECT_EQ(cl->compute(g, tokens, y).code(), StatusCode::kOutOfMemory);
}

TEST(OpenclBackend, UnsupportedWeightTypeIsAClearError) {
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(24);
  // Q8_K is an activation format (ggml never stores weights in it): no device layout.
  std::vector<uint8_t> q8k(292 * 4, 0);  // 4 rows of one Q8_K block
  table.add_bytes(GgmlType::kQ8_K, 4, 256, q8k);
  const Status s = cl->load_weights(table.descs());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("q8_K"), std::string::npos) << s.message();
}

TEST(OpenclBackend, BadGraphsAreErrorsNotCrashes) {
  BITNET_CL_BACKEND_OR_SKIP(cl, ClOptions{});
  WeightTable table(25);
  const hal::WeightId tern = table.add_ternary(GgmlType::kTQ2_0, 4, 256);
  const hal::WeightId emb = table.add_float(GgmlType::kF32, 4, 256);
  ASSERT_TRUE(cl->load_weights(table.descs()).ok());
  ASSERT_TRUE(cl->init_kv({1, 8, 16}).ok());
  std::vector<float> y(256);
  {
    hal::Graph g;  // a ternary embedding
    g.n_tokens = 1;
    const hal::ActId x = add_act(g, "x", 1, 256);
    g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = x, .w = tern});
    g.logits = x;
    EXPECT_EQ(cl->compute(g, std::vector<int32_t>{0}, y).code(), StatusCode::kUnsupported);
  }
  {
    hal::Graph g;  // float activations into a ternary weight
    g.n_tokens = 1;
    const hal::ActId x = add_act(g, "x", 1, 256);
    const hal::ActId o = add_act(g, "o", 1, 4);
    g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = x, .w = emb});
    g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = o, .a = x, .w = tern});
    g.logits = o;
    std::vector<float> o4(4);
    EXPECT_EQ(cl->compute(g, std::vector<int32_t>{0}, o4).code(), StatusCode::kUnsupported);
    // A token outside the table.
    g.ops.pop_back();
    g.logits = x;
    EXPECT_EQ(cl->compute(g, std::vector<int32_t>{4}, y).code(), StatusCode::kInvalidArgument);
    // Positions beyond the context.
    g.pos0 = 8;
    EXPECT_EQ(cl->compute(g, std::vector<int32_t>{0}, y).code(), StatusCode::kOutOfRange);
  }
}


// Work-groups of 8 (the smallest the kernels take): more scale blocks than work-items (TQ2_0
// rows of 27 blocks), one float row per group, reductions over few lanes; still exact.
TEST(OpenclBackend, SmallWorkGroupsGiveTheSameResults) {
  ClOptions options;
  options.work_group = 8;
  BITNET_CL_BACKEND_OR_SKIP(cl, options);
  WeightTable table(26);
  const int64_t n_tokens = 3, n_cols = 6912;
  const hal::WeightId emb = table.add_float(GgmlType::kF32, 8, n_cols);
  const hal::WeightId norm = table.add_float(GgmlType::kF32, 0, n_cols);
  const hal::WeightId tq = table.add_ternary(GgmlType::kTQ2_0, 9, n_cols);
  const hal::WeightId f16 = table.add_float(GgmlType::kF16, 5, n_cols);
  hal::Graph g;
  g.n_tokens = n_tokens;
  const hal::ActId x = add_act(g, "x", n_tokens, n_cols);
  const hal::ActId xq = add_act(g, "xq", n_tokens, n_cols, hal::ActType::kQ8);
  const hal::ActId y = add_act(g, "y", n_tokens, 9);
  const hal::ActId z = add_act(g, "z", n_tokens, 5);
  g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = x, .w = emb});
  g.ops.push_back({.kind = hal::OpKind::kRmsNorm, .dst = x, .a = x, .w = norm, .eps = 1e-5f});
  g.ops.push_back({.kind = hal::OpKind::kQuantizeAct, .dst = xq, .a = x});
  g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = y, .a = xq, .w = tq});
  g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = z, .a = x, .w = f16});
  const std::vector<int32_t> tokens = {3, 7, 0};
  for (hal::ActId out : {y, z}) {
    g.logits = out;
    compare_with_cpu(*cl, table, {1, 8, 16}, {{g, tokens}}, 0.0, 0.0, "work-group 8");
  }
}

}  // namespace
}  // namespace bitnet::opencl::test
