// The generation loop: stop strings never leak, UTF-8 is never split, cancellation, prefix reuse.
#include "server/generation.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace bitnet::server {
namespace {

TEST(HeldBack, UnfinishedUtf8AndStopPrefixes) {
  const std::vector<std::string> none;
  EXPECT_EQ(held_back("abc", none), 0u);
  EXPECT_EQ(held_back("ab\xC3", none), 1u);          // first byte of a 2-byte character
  EXPECT_EQ(held_back("ab\xE2\x82", none), 2u);      // 2 of 3 bytes
  EXPECT_EQ(held_back("ab\xE2\x82\xAC", none), 0u);  // complete
  EXPECT_EQ(held_back("\xF0\x9F\xA6", none), 3u);
  const std::vector<std::string> stop = {"END", "\n\n"};
  EXPECT_EQ(held_back("the E", stop), 1u);
  EXPECT_EQ(held_back("the EN", stop), 2u);
  EXPECT_EQ(held_back("the X", stop), 0u);
  EXPECT_EQ(held_back("line\n", stop), 1u);
}

std::unique_ptr<Engine> tiny_engine() {
  const std::filesystem::path model = std::filesystem::path(BITNET_SOURCE_DIR) / "models/tiny-stories-b158.gguf";
  EngineOptions o;
  o.model_path = model.string();
  o.device = "cpu";
  o.n_ctx = 256;
  o.n_threads = 1;
  auto e = Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(*e) : nullptr;
}

GenerationRequest greedy(std::vector<std::string> stop = {}) {
  GenerationRequest r;
  r.sampling.temperature = 0.0f;
  r.stop = std::move(stop);
  return r;
}

TEST(Generate, StreamsTheSameTextItReturnsAndReusesTheCachedPrefix) {
  auto engine = tiny_engine();
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = engine->tokenize("Once upon a time", true, false);
  std::atomic<bool> cancel{false};
  std::string streamed;
  auto r = generate(*engine, prompt, greedy(), 24, cancel, [&](std::string_view d) {
    streamed += d;
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->completion_tokens, 24);
  EXPECT_EQ(r->finish_reason, "length");
  EXPECT_EQ(streamed, r->text);
  EXPECT_EQ(r->cached_tokens, 0);
  // The same prompt again: all but its last token come from the KV cache, same greedy text.
  auto again = generate(*engine, prompt, greedy(), 24, cancel, [](std::string_view) { return true; });
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cached_tokens, static_cast<int64_t>(prompt.size()) - 1);
  EXPECT_EQ(again->text, r->text);

  // A stop string cuts the text before it, and no part of it was streamed.
  ASSERT_GT(r->text.size(), 12u);
  const std::string stop = r->text.substr(8, 4);
  streamed.clear();
  auto stopped = generate(*engine, prompt, greedy({stop}), 24, cancel, [&](std::string_view d) {
    streamed += d;
    return true;
  });
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->finish_reason, "stop");
  EXPECT_EQ(stopped->text, r->text.substr(0, r->text.find(stop)));
  EXPECT_EQ(streamed, stopped->text);
}

TEST(Generate, CancelStopsAtTheNextStep) {
  auto engine = tiny_engine();
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = engine->tokenize("Once upon a time", true, false);
  std::atomic<bool> cancel{false};
  int deltas = 0;
  auto r = generate(*engine, prompt, greedy(), 100, cancel, [&](std::string_view) { return ++deltas < 3; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish_reason, "cancelled");
  EXPECT_LE(r->completion_tokens, 5);
  cancel = true;
  auto before = generate(*engine, prompt, greedy(), 100, cancel, [](std::string_view) { return true; });
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->finish_reason, "cancelled");
  EXPECT_EQ(before->completion_tokens, 0);
}

}  // namespace
}  // namespace bitnet::server
