// Whole models: the Vulkan backend's logits against the CPU backend's, through a prompt chunk
// and greedy decode steps over the KV cache.
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/vulkan/vk_test_util.h"
#include "gguf/gguf.h"
#include "model/model.h"

namespace bitnet::vulkan::test {
namespace {

struct ModelCase {
  const char* path;  // relative to ../shared
  double max_abs_diff;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.path; }

class VulkanWholeModel : public testing::TestWithParam<ModelCase> {};

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST_P(VulkanWholeModel, LogitsAndGreedyTokensMatchCpu) {
  const ModelCase c = GetParam();
  const std::filesystem::path path = std::filesystem::path(BITNET_SHARED_DIR) / c.path;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing test data: " << path;
  BITNET_VK_BACKEND_OR_SKIP(vk, VulkanOptions{});
  auto file = gguf::File::open(path.string());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto model = Network::from_gguf(*file);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const ModelConfig& cfg = model->config();
  auto cpu = cpu_reference();
  const int64_t n_ctx = 64;
  const hal::KvShape kv{static_cast<int32_t>(cfg.n_layer), n_ctx, cfg.n_embd_kv()};
  for (hal::Backend* b : {vk.get(), cpu.get()}) {
    ASSERT_TRUE(b->load_weights(model->weight_table()).ok());
    ASSERT_TRUE(b->init_kv(kv).ok());
  }
  const int64_t n_vocab = cfg.n_vocab;
  double worst = 0.0;
  // step: tokens, logits of every row (prompt chunks) or the last one.
  const auto step = [&](std::span<const int32_t> tokens, int64_t pos0, LogitRows rows) -> std::vector<float> {
    const hal::Graph g = model->build_graph(static_cast<int64_t>(tokens.size()), pos0, rows);
    const size_t n = static_cast<size_t>((rows == LogitRows::kAll ? static_cast<int64_t>(tokens.size()) : 1) * n_vocab);
    std::vector<float> a(n), b(n);
    const Status sv = vk->compute(g, tokens, a);
    EXPECT_TRUE(sv.ok()) << sv.to_string();
    const Status sc = cpu->compute(g, tokens, b);
    EXPECT_TRUE(sc.ok()) << sc.to_string();
    const Diff d = compare(a, b);
    worst = std::max(worst, d.max_abs);
    EXPECT_LE(d.max_abs, c.max_abs_diff) << "pos0 " << pos0 << " n_tokens " << tokens.size();
    for (size_t r = 0; r < n / static_cast<size_t>(n_vocab); ++r) {
      const std::span<const float> ra(a.data() + r * static_cast<size_t>(n_vocab), static_cast<size_t>(n_vocab));
      const std::span<const float> rb(b.data() + r * static_cast<size_t>(n_vocab), static_cast<size_t>(n_vocab));
      EXPECT_EQ(argmax(ra), argmax(rb)) << "pos0 " << pos0 << " row " << r;
    }
    return b;
  };
  // A prompt in two chunks (all rows, then the last row), then greedy decoding.
  std::vector<int32_t> prompt = {1, 5, 9, 17, 33, 65, 129 % static_cast<int32_t>(n_vocab), 7, 3, 11};
  step(std::span<const int32_t>(prompt).first(6), 0, LogitRows::kAll);
  std::vector<float> logits = step(std::span<const int32_t>(prompt).subspan(6), 6, LogitRows::kLast);
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < 12; ++i) {
    const int32_t next = argmax(logits);
    logits = step(std::span<const int32_t>(&next, 1), pos, LogitRows::kLast);
    ++pos;
  }
  std::printf("%s: max |vulkan - cpu| %.3g over %lld positions\n", c.path, worst, static_cast<long long>(pos));
  const hal::BackendStats s = vk->stats();
  EXPECT_GT(s.weight_bytes, 0u);
  EXPECT_GT(s.kv_bytes, 0u);
  EXPECT_GT(s.pool_reuses, 0u);  // decode steps reuse the activation buffers
}

INSTANTIATE_TEST_SUITE_P(Models, VulkanWholeModel,
                         testing::Values(ModelCase{"golden/bitnetcpp/tiny-bitnet-i2_s.gguf", 1e-3},
                                         ModelCase{"golden/llamacpp/tiny-bitnet-tq2_0.gguf", 1e-3},
                                         ModelCase{"golden/llamacpp/tiny-bitnet-tq1_0.gguf", 1e-3},
                                         ModelCase{"golden/ik_llama/tiny-b158-f32.gguf", 1e-3},
                                         ModelCase{"models/stories260K-v1.gguf", 1e-3}),
                         [](const auto& p) {
                           std::string name = std::filesystem::path(p.param.path).stem().string();
                           for (char& ch : name) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace bitnet::vulkan::test
