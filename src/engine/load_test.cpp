// Engine::load on models that cannot fit: a context whose KV cache exceeds the memory left is
// a clear error that names the file and the way out (-c), before anything is allocated.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>

#include "bitnet/engine.h"
#include "bitnet/synth.h"

namespace bitnet {
namespace {

class EngineLoad : public testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("load_test_" + std::to_string(::getpid()) + ".gguf");
    SynthOptions o;
    o.output_path = path_.string();
    o.shape.n_ctx = 2000000000;  // 2 layers x 128 KV values x 2e9 positions: a 1.9 TiB F16 cache
    ASSERT_TRUE(synthesize_model(o).ok());
  }
  void TearDown() override { std::filesystem::remove(path_); }

  EngineOptions options(int64_t n_ctx) const {
    EngineOptions o;
    o.model_path = path_.string();
    o.device = "cpu";
    o.n_threads = 1;
    o.n_ctx = n_ctx;
    return o;
  }

  std::filesystem::path path_;
};

TEST_F(EngineLoad, AContextLargerThanMemoryIsRefusedWithTheWayOut) {
  const auto engine = Engine::load(options(0));  // 0: the model's own context
  ASSERT_FALSE(engine.ok());
  const Status& s = engine.status();
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(s.message().find(path_.string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("a context of 2000000000 tokens"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("-c"), std::string::npos) << s.message();
}

TEST_F(EngineLoad, ASmallerContextOfTheSameModelLoads) {
  auto engine = Engine::load(options(64));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  EXPECT_EQ((*engine)->n_ctx(), 64);
  EXPECT_TRUE((*engine)->eval(std::vector<int32_t>{1, 2, 3}, false).ok());
}

// --head-type q8_0: the tied F16 head (and embedding) requantized at load; logits move by the
// quantization error only.
TEST_F(EngineLoad, AHeadRequantizedAtLoadGivesCloseLogits) {
  auto f16 = Engine::load(options(64));
  ASSERT_TRUE(f16.ok()) << f16.status().to_string();
  EngineOptions o = options(64);
  o.head_type = "q8_0";
  auto q8 = Engine::load(o);
  ASSERT_TRUE(q8.ok()) << q8.status().to_string();
  EXPECT_NE((*q8)->model().weight_types.find("q8_0:1"), std::string::npos) << (*q8)->model().weight_types;
  const std::vector<int32_t> tokens = {1, 5, 9, 200};
  const auto a = (*f16)->eval(tokens, false);
  const auto b = (*q8)->eval(tokens, false);
  ASSERT_TRUE(a.ok() && b.ok());
  // A random model amplifies the embedding's rounding through its int8 activations, so the
  // bar is the correlation of the logits, not their distance.
  double sab = 0, saa = 0, sbb = 0, sa = 0, sb = 0;
  const double n = static_cast<double>(a->size());
  for (size_t i = 0; i < a->size(); ++i) {
    const double x = (*a)[i], y = (*b)[i];
    sa += x; sb += y; sab += x * y; saa += x * x; sbb += y * y;
  }
  const double corr = (sab - sa * sb / n) / std::sqrt((saa - sa * sa / n) * (sbb - sb * sb / n));
  EXPECT_NE(*a, *b);        // the head really changed ...
  EXPECT_GT(corr, 0.999);   // ... by Q8_0's rounding only
  EXPECT_LT(corr, 1.0);

  o.head_type = "q5";
  const auto bad = Engine::load(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

// Pearson correlation of two equally long rows.
double correlation(std::span<const float> a, std::span<const float> b) {
  double sab = 0, saa = 0, sbb = 0, sa = 0, sb = 0;
  const double n = static_cast<double>(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    sa += x; sb += y; sab += x * y; saa += x * x; sbb += y * y;
  }
  return (sab - sa * sb / n) / std::sqrt((saa - sa * sa / n) * (sbb - sb * sb / n));
}

// --cache-type: F16 (the default) against F32 on the same tokens. Every row of logits moves by
// the halves' rounding only; the receipt records the type and the bytes, which halve.
TEST_F(EngineLoad, AnF16CacheGivesCloseLogitsInHalfTheBytes) {
  EngineOptions o = options(64);
  EXPECT_EQ(o.cache_type, "f16");
  auto f16 = Engine::load(o);
  ASSERT_TRUE(f16.ok()) << f16.status().to_string();
  o.cache_type = "f32";
  auto f32 = Engine::load(o);
  ASSERT_TRUE(f32.ok()) << f32.status().to_string();
  EXPECT_EQ((*f16)->kv_type(), "f16");
  EXPECT_EQ((*f32)->kv_type(), "f32");
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 40; ++i) tokens.push_back(1 + (i * 37) % 250);
  const auto a = (*f16)->eval(tokens, true);
  const auto b = (*f32)->eval(tokens, true);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);  // the cache really holds halves
  const size_t n_vocab = static_cast<size_t>((*f16)->n_vocab());
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::span<const float> ra(a->data() + t * n_vocab, n_vocab), rb(b->data() + t * n_vocab, n_vocab);
    EXPECT_GT(correlation(ra, rb), 0.999) << "row " << t;
  }
  const auto ja = (*f16)->receipt_json({});
  const auto jb = (*f32)->receipt_json({});
  ASSERT_TRUE(ja.ok() && jb.ok());
  const auto ra = nlohmann::json::parse(*ja), rb = nlohmann::json::parse(*jb);
  EXPECT_EQ(ra["request"]["cache_type"], "f16");
  EXPECT_EQ(ra["stats"]["kv_type"], "f16");
  EXPECT_EQ(rb["stats"]["kv_type"], "f32");
  EXPECT_GT(rb["stats"]["kv_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(ra["stats"]["kv_bytes"].get<uint64_t>() * 2, rb["stats"]["kv_bytes"].get<uint64_t>());

  o.cache_type = "q8_0";
  const auto bad = Engine::load(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("f16, f32"), std::string::npos) << bad.status().message();
}

// truncate(): the sequence keeps a prefix and continues from it, as if the rest had never
// been evaluated (a chat turn reuses the KV cache of the conversation so far).
TEST_F(EngineLoad, TruncateContinuesFromTheKeptPrefix) {
  auto engine = Engine::load(options(64));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  Engine& e = **engine;
  ASSERT_TRUE(e.eval(std::vector<int32_t>{1, 2, 3, 4, 5}, false).ok());
  e.truncate(2);
  EXPECT_EQ(e.n_past(), 2);
  EXPECT_EQ(std::vector<int32_t>(e.cached_tokens().begin(), e.cached_tokens().end()), (std::vector<int32_t>{1, 2}));
  auto continued = e.eval(std::vector<int32_t>{7, 8}, false);
  ASSERT_TRUE(continued.ok());
  e.reset();
  auto fresh = e.eval(std::vector<int32_t>{1, 2, 7, 8}, false);
  ASSERT_TRUE(fresh.ok());
  ASSERT_EQ(continued->size(), fresh->size());
  for (size_t i = 0; i < fresh->size(); ++i) ASSERT_NEAR((*continued)[i], (*fresh)[i], 1e-4f) << i;
  e.truncate(100);  // more than n_past: nothing changes
  EXPECT_EQ(e.n_past(), 4);
}

}  // namespace
}  // namespace bitnet
