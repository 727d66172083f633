// Engine::load on models that cannot fit: a context whose KV cache exceeds the memory left is
// a clear error that names the file and the way out (-c), before anything is allocated.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

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
    o.shape.n_ctx = 2000000000;  // 2 layers x 128 KV values x 2e9 positions: a 3.7 TiB F32 cache
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

}  // namespace
}  // namespace bitnet
