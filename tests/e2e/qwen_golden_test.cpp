// qwen2 and qwen3 against engines no one here wrote: the models are synthesized here (bitnet
// synth, deterministic), the reference logits come from llama.cpp (qwen2) and ik_llama.cpp
// (qwen3) on the same bytes; see golden/README.md.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <unistd.h>

#include "bitnet/devices.h"
#include "bitnet/engine.h"
#include "bitnet/synth.h"
#include "core/sha256.h"
#include "golden_util.h"

namespace bitnet {
namespace {

struct QwenCase {
  const char* stem;  // golden/<stem>.logits.*
  const char* arch;
  int64_t head_dim;  // 0: n_embd / n_head
};

void PrintTo(const QwenCase& c, std::ostream* os) { *os << c.stem; }

std::string unavailable_reason(const std::string& device) {
  if (device == "cpu") return "";
  for (const BackendDescription& b : list_devices({})) {
    if (b.backend == device) return b.available ? "" : (b.compiled ? b.reason : "not compiled in");
  }
  return "unknown backend";
}

std::string file_sha256(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return sha256_hex(bytes);
}

// The model of golden/README.md in the temporary folder, removed when this goes out of scope.
struct TempModel {
  std::filesystem::path path;
  ~TempModel() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

void synthesize(const QwenCase& c, const std::filesystem::path& path) {
  SynthOptions o;
  o.output_path = path.string();
  o.weight_type = "f32";
  o.shape.architecture = c.arch;
  o.shape.n_vocab = 512;
  o.shape.n_embd = 256;
  o.shape.n_layer = 2;
  o.shape.n_head = 4;
  o.shape.n_head_kv = 2;
  o.shape.n_ff = 768;
  o.shape.n_embd_head = c.head_dim;
  const Status st = synthesize_model(o);
  EXPECT_TRUE(st.ok()) << st.to_string();
}

class QwenGolden : public testing::TestWithParam<std::tuple<QwenCase, const char*>> {};

TEST_P(QwenGolden, LogitsMatchReferenceEngine) {
  const QwenCase& c = std::get<0>(GetParam());
  const std::string device = std::get<1>(GetParam());
  if (const std::string why = unavailable_reason(device); !why.empty()) GTEST_SKIP() << device << ": " << why;
  test::GoldenLogits golden;
  std::string error;
  ASSERT_TRUE(test::read_golden(std::filesystem::path(BITNET_E2E_GOLDEN_DIR) / c.stem, golden, error)) << error;
  const TempModel temp{std::filesystem::temp_directory_path() / fmt::format("bitnet_{}_{}.gguf", c.stem, getpid())};
  synthesize(c, temp.path);
  const std::filesystem::path& model = temp.path;
  ASSERT_EQ(file_sha256(model), golden.model_sha256)
      << "bitnet synth no longer writes the file the reference logits were computed on; see golden/README.md";

  EngineOptions o;
  o.model_path = model.string();
  o.device = device;
  o.strict = true;
  o.n_ctx = 64;
  auto engine = Engine::load(o);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  EXPECT_EQ((*engine)->backend_name().rfind(device, 0), 0u) << (*engine)->backend_name();
  auto logits = (*engine)->eval(golden.ids, /*all_logits=*/true);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  const test::LogitStats s = test::compare_logits(*logits, golden.logits, golden.n_vocab);
  std::printf("%s on %s: max|diff| %.5f mean|diff| %.5f min corr %.7f argmax agreement %.3f\n", c.stem,
              device.c_str(), s.max_abs_diff, s.mean_abs_diff, s.min_row_correlation, s.argmax_agreement);
  // The two reference engines differ by max 0.012, mean 0.0019 on qwen2-tiny (logits spread
  // about 17.5); a missing bias or q/k norm moves the logits by whole units.
  EXPECT_LE(s.max_abs_diff, 0.05);
  EXPECT_LE(s.mean_abs_diff, 0.005);
  EXPECT_GE(s.min_row_correlation, 0.99999);
  EXPECT_EQ(s.argmax_agreement, 1.0);
}

INSTANTIATE_TEST_SUITE_P(
    Golden, QwenGolden,
    testing::Combine(testing::Values(QwenCase{"qwen2-tiny", "qwen2", 0}, QwenCase{"qwen3-tiny", "qwen3", 96}),
                     testing::Values("cpu", "opencl", "vulkan")),
    [](const testing::TestParamInfo<std::tuple<QwenCase, const char*>>& p) {
      std::string name = std::string(std::get<0>(p.param).stem) + "_" + std::get<1>(p.param);
      for (char& ch : name) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

}  // namespace
}  // namespace bitnet
