// Several sequences in one paged KV cache: a batched step gives each sequence the logits it
// gets alone, the pool's blocks are taken and given back, a full pool is a clean error.
#include <gtest/gtest.h>

#include <filesystem>

#include "bitnet/devices.h"
#include "bitnet/engine.h"

namespace bitnet {
namespace {

std::unique_ptr<Engine> load(int64_t kv_block, int64_t n_ctx, const std::string& device = "cpu") {
  EngineOptions o;
  o.model_path = (std::filesystem::path(BITNET_SOURCE_DIR) / "models/tiny-stories-b158.gguf").string();
  o.device = device;
  o.strict = true;
  o.n_ctx = n_ctx;
  o.n_threads = 1;
  o.kv_block = kv_block;
  auto e = Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(*e) : nullptr;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Greedy continuation of `prompt` by an engine of its own (plain cache): n tokens.
std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int n, const std::string& device) {
  auto e = load(0, 256, device);
  std::vector<int32_t> out;
  auto logits = e->eval(prompt, false);
  EXPECT_TRUE(logits.ok());
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(*logits));
    logits = e->eval(std::span<const int32_t>(&out.back(), 1), false);
    EXPECT_TRUE(logits.ok());
  }
  return out;
}

bool runnable(const std::string& device) {
  if (device == "cpu") return true;
  for (const BackendDescription& b : list_devices({})) {
    if (b.backend == device) return b.available;
  }
  return false;
}

class Batch : public testing::TestWithParam<const char*> {};

TEST_P(Batch, SequencesStepTogetherAsTheyRunAlone) {
  const std::string device = GetParam();
  if (!runnable(device)) GTEST_SKIP() << device << " is not available here";
  auto e = load(16, 256, device);
  ASSERT_NE(e, nullptr);
  const std::vector<std::vector<int32_t>> prompts = {
      e->tokenize("Once upon a time", true, false), e->tokenize("The little dog ran to the park and", true, false),
      e->tokenize("Lily", true, false)};
  constexpr int kGen = 20;
  std::vector<int32_t> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto s = e->open_sequence();
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    seqs.push_back(*s);
  }
  // Step 1: the first prompt alone; then all three interleaved: prompts 2 and 3 prefill while
  // sequence 1 decodes (chunked prefill next to decode tokens).
  std::vector<std::vector<int32_t>> got(prompts.size());
  std::vector<int32_t> next(prompts.size(), -1);
  std::vector<bool> started(prompts.size(), false);
  for (int step = 0; step < kGen + 3; ++step) {
    std::vector<Engine::StepInput> batch;
    std::vector<size_t> who;
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (static_cast<int>(got[i].size()) == kGen || (i > 0 && step == 0)) continue;
      if (!started[i]) {
        batch.push_back({seqs[i], prompts[i]});
        started[i] = true;
      } else {
        batch.push_back({seqs[i], std::span<const int32_t>(&next[i], 1)});
      }
      who.push_back(i);
    }
    if (batch.empty()) break;
    auto logits = e->step(batch);
    ASSERT_TRUE(logits.ok()) << logits.status().to_string();
    ASSERT_EQ(logits->size(), batch.size());
    for (size_t j = 0; j < who.size(); ++j) {
      next[who[j]] = argmax((*logits)[j]);
      got[who[j]].push_back(next[who[j]]);
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i], alone(prompts[i], kGen, device)) << "sequence " << i;
    EXPECT_EQ(e->sequence_tokens(seqs[i]).size(), prompts[i].size() + kGen - 1);
  }
  // Blocks come back when sequences close.
  const int64_t before = e->free_kv_positions();
  e->close_sequence(seqs[1]);
  EXPECT_GT(e->free_kv_positions(), before);
  EXPECT_TRUE(e->sequence_tokens(seqs[1]).empty());
  EXPECT_FALSE(e->step(std::vector<Engine::StepInput>{{seqs[1], prompts[0]}}).ok());  // closed
}

INSTANTIATE_TEST_SUITE_P(Devices, Batch, testing::Values("cpu", "opencl", "vulkan"));

TEST(BatchPool, AFullPoolIsACleanError) {
  auto e = load(16, 64);  // 4 blocks
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->free_kv_positions(), 64);
  auto a = e->open_sequence();
  auto b = e->open_sequence();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<int32_t> forty(40, 5);  // 3 blocks
  ASSERT_TRUE(e->step(std::vector<Engine::StepInput>{{*a, forty}}).ok());
  EXPECT_EQ(e->free_kv_positions(), 16);
  auto full = e->step(std::vector<Engine::StepInput>{{*b, forty}});
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(e->free_kv_positions(), 16);  // nothing taken
  EXPECT_TRUE(e->sequence_tokens(*b).empty());
  e->truncate_sequence(*a, 10);  // keeps one block
  EXPECT_EQ(e->free_kv_positions(), 48);
  EXPECT_TRUE(e->step(std::vector<Engine::StepInput>{{*b, forty}}).ok());
  EXPECT_FALSE(e->step(std::vector<Engine::StepInput>{{*a, forty}, {*a, forty}}).ok());  // twice in one step
}

// The single-sequence calls run on sequence 0 of a paged cache with the logits of a plain one.
TEST(BatchPool, PagedSequenceZeroEqualsThePlainCache) {
  auto plain = load(0, 256);
  auto paged = load(16, 256);
  ASSERT_TRUE(plain && paged);
  const std::vector<int32_t> prompt = plain->tokenize("Once upon a time there was", true, false);
  auto a = plain->eval(prompt, true);
  auto b = paged->eval(prompt, true);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(paged->n_past(), static_cast<int64_t>(prompt.size()));
  paged->truncate(3);
  EXPECT_EQ(paged->n_past(), 3);
  EXPECT_EQ(paged->open_sequence().ok(), true);
  EXPECT_EQ(plain->open_sequence().status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace bitnet

namespace bitnet {
namespace {

// fork_sequence shares whole blocks of a prefix: the fork continues exactly as a sequence
// that evaluated the prefix itself, the source may go on or close, the blocks are freed only
// when the last holder lets go, and truncating into a shared block backs off to its start.
TEST(BatchPool, ForkedPrefixesShareBlocks) {
  auto e = load(16, 256);
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> prompt =
      e->tokenize("Once upon a time, there was a little girl named Lily. She loved to play in the park", true, false);
  ASSERT_GT(prompt.size(), 17u);
  auto a = e->open_sequence();
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(e->step(std::vector<Engine::StepInput>{{*a, prompt}}).ok());
  const int64_t free_before = e->free_kv_positions();
  auto b = e->fork_sequence(*a, static_cast<int64_t>(prompt.size()) - 1);
  ASSERT_TRUE(b.ok());
  const size_t shared = (prompt.size() - 1) / 16 * 16;
  EXPECT_EQ(e->sequence_tokens(*b).size(), shared);
  EXPECT_EQ(e->free_kv_positions(), free_before);  // nothing copied, nothing taken
  // The fork evaluates the rest of the prompt and continues greedily like a fresh sequence.
  const std::vector<int32_t> rest(prompt.begin() + static_cast<std::ptrdiff_t>(shared), prompt.end());
  auto logits = e->step(std::vector<Engine::StepInput>{{*b, rest}});
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  std::vector<int32_t> got = {argmax((*logits)[0])};
  e->close_sequence(*a);  // the source goes away; the shared blocks stay for the fork
  for (int i = 0; i < 9; ++i) {
    logits = e->step(std::vector<Engine::StepInput>{{*b, std::span<const int32_t>(&got.back(), 1)}});
    ASSERT_TRUE(logits.ok());
    got.push_back(argmax((*logits)[0]));
  }
  EXPECT_EQ(got, alone(prompt, 10, "cpu"));
  // Truncating into the first (shared with nobody now) block keeps what was asked.
  EXPECT_EQ(e->truncate_sequence(*b, 5), 5);
  auto c = e->fork_sequence(*b, 5);  // less than a block: shares nothing
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(e->sequence_tokens(*c).empty());
  e->close_sequence(*b);
  e->close_sequence(*c);
  EXPECT_EQ(e->free_kv_positions(), 256 - 16 * ((static_cast<int64_t>(e->n_past()) + 15) / 16));
}

TEST(BatchPool, TruncatingIntoASharedBlockBacksOffToItsStart) {
  auto e = load(16, 256);
  ASSERT_NE(e, nullptr);
  auto a = e->open_sequence();
  ASSERT_TRUE(a.ok());
  const std::vector<int32_t> forty(40, 7);
  ASSERT_TRUE(e->step(std::vector<Engine::StepInput>{{*a, forty}}).ok());
  auto b = e->fork_sequence(*a, 40);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(e->sequence_tokens(*b).size(), 32u);
  EXPECT_EQ(e->truncate_sequence(*a, 20), 16);  // block 1 is shared with b: not written into
  EXPECT_EQ(e->truncate_sequence(*b, 20), 20);  // a gave it up: b's alone now
  ASSERT_TRUE(e->step(std::vector<Engine::StepInput>{{*a, forty}, {*b, forty}}).ok());
}

}  // namespace
}  // namespace bitnet
