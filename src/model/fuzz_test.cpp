// The model fuzz target's body (fuzz_entry.h) under plain ctest: the repo's trained model and
// a synthesized one of each weight type, each whole and over deterministic mutations of their
// metadata (counts, lengths, shapes, hyper-parameters) and truncations.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "bitnet/synth.h"
#include "model/fuzz_entry.h"

namespace bitnet {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int run(const std::vector<uint8_t>& b) { return model_fuzz_one(b.data(), b.size()); }

std::vector<std::vector<uint8_t>> seed_models() {
  std::vector<std::vector<uint8_t>> out = {read_file(std::string(BITNET_SOURCE_DIR) + "/models/tiny-stories-b158.gguf")};
  const std::string dir = ::testing::TempDir();
  for (const char* type : {"i2_s", "tq2_0", "tq1_0", "f16"}) {
    SynthOptions o;
    o.output_path = dir + "/fuzz-seed-" + type + ".gguf";
    o.weight_type = type;
    o.shape = {.architecture = "bitnet-b1.58", .n_vocab = 400, .n_embd = 256, .n_layer = 1,
               .n_head = 4, .n_head_kv = 2, .n_ff = 256};
    const Status s = synthesize_model(o);
    EXPECT_TRUE(s.ok()) << type << ": " << s.to_string();
    out.push_back(read_file(o.output_path));
    std::filesystem::remove(o.output_path);
  }
  return out;
}

TEST(ModelFuzz, MutatedModelsNeverCrash) {
  std::mt19937_64 rng(11);
  int runs = 0;
  for (const std::vector<uint8_t>& seed : seed_models()) {
    ASSERT_GT(seed.size(), 4096u);
    EXPECT_EQ(run(seed), kModelBuilt | kTokenizerBuilt);
    int built = 0;
    for (int i = 0; i < 200; ++i) {
      std::vector<uint8_t> b = seed;
      // The header and metadata (counts, shapes, hyper-parameters) live in the first 4 KB.
      for (int m = 0, n = 1 + int(rng() % 4); m < n; ++m) b[rng() % 4096] = uint8_t(rng());
      if (i % 10 == 9) b.resize(rng() % b.size());
      built += run(b) & kModelBuilt;
      ++runs;
    }
    EXPECT_GT(built, 0);  // most metadata mutations leave a loadable model
  }
  EXPECT_EQ(runs, 5 * 200);
}

}  // namespace
}  // namespace bitnet
