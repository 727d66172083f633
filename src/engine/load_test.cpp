// Engine::load on models that cannot fit: a context whose KV cache exceeds the memory left is
// a clear error that names the file and the way out (-c), before anything is allocated.
#include <gtest/gtest.h>

#include <unistd.h>

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

}  // namespace
}  // namespace bitnet
