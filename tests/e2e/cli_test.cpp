// The `bitnet` command line on good and bad input: bad input gets one clear error line and a
// non-zero exit, never a crash or a hang.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "golden_util.h"

namespace bitnet {
namespace {

namespace fs = std::filesystem;

struct Output {
  int exit_code = -1;  // -1: killed by a signal
  std::string out;
  std::string err;
};

fs::path temp_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("bitnet_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Output run_cli(const std::string& args) {
  const fs::path out = temp_dir() / "stdout.txt";
  const fs::path err = temp_dir() / "stderr.txt";
  const std::string cmd = "timeout 120 " + std::string(BITNET_CLI_PATH) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  Output o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = slurp(out);
  o.err = slurp(err);
  return o;
}

// A small synthetic model made by the CLI itself.
fs::path synth(const std::string& name, const std::string& type) {
  const fs::path p = temp_dir() / name;
  if (!fs::exists(p)) {
    const Output o = run_cli("synth -o " + p.string() + " --preset tiny --type " + type);
    EXPECT_EQ(o.exit_code, 0) << o.err;
  }
  return p;
}

// Copy of `src` with the first occurrence of `from` replaced by `to` (same length).
fs::path patched(const fs::path& src, const std::string& name, const std::string& from, const std::string& to) {
  std::string bytes = slurp(src);
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(from.size(), to.size());
  bytes.replace(at, from.size(), to);
  const fs::path p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

void expect_clean_error(const Output& o, const std::string& needle) {
  EXPECT_GT(o.exit_code, 0) << "stderr: " << o.err;
  EXPECT_NE(o.err.find("error: "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << o.err;
}

TEST(Cli, HelpForEveryCommand) {
  for (const char* cmd : {"", "run", "tokenize", "inspect", "logits", "perplexity", "synth"}) {
    const Output o = run_cli(std::string(cmd) + " --help");
    EXPECT_EQ(o.exit_code, 0) << cmd;
    EXPECT_NE(o.out.find("Usage"), std::string::npos) << cmd << ": " << o.out;
  }
}

TEST(Cli, SynthesizedModelRunsInEveryWeightType) {
  for (const char* type : {"i2_s", "tq2_0", "tq1_0", "f16", "f32"}) {
    const fs::path model = synth(std::string("tiny-") + type + ".gguf", type);
    const Output o = run_cli("run -m " + model.string() + " -p hello -n 8 --temp 0 -t 2");
    EXPECT_EQ(o.exit_code, 0) << type << ": " << o.err;
    EXPECT_NE(o.err.find("generated: 8 tokens"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("requested=auto detected=[cpu-scalar"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("selected=cpu-scalar"), std::string::npos) << o.err;
  }
}

TEST(Cli, SameSeedSameText) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const std::string args = "run -m " + model.string() + " -p hello -n 16 --temp 1.0 --seed 1234";
  const Output a = run_cli(args);
  const Output b = run_cli(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(Cli, UnreadableFiles) {
  expect_clean_error(run_cli("run -m /nonexistent/model.gguf -p hi"), "cannot open");
  expect_clean_error(run_cli("run -m " + temp_dir().string() + " -p hi"), "not a regular file");
  const fs::path empty = temp_dir() / "empty.gguf";
  std::ofstream(empty).close();
  expect_clean_error(run_cli("inspect " + empty.string()), "empty.gguf");
}

TEST(Cli, TruncatedModel) {
  const std::string bytes = slurp(synth("tiny-f32.gguf", "f32"));
  for (size_t len : {size_t{3}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    const fs::path p = temp_dir() / "truncated.gguf";
    std::ofstream(p, std::ios::binary) << bytes.substr(0, len);
    expect_clean_error(run_cli("run -m " + p.string() + " -p hi"), "truncated.gguf");
  }
}

TEST(Cli, UnknownArchitecture) {
  const fs::path p = patched(synth("tiny-i2_s.gguf", "i2_s"), "arch.gguf", "bitnet-b1.58\x0c", "bitnet-b9.99\x0c");
  expect_clean_error(run_cli("run -m " + p.string() + " -p hi"), "unknown architecture");
}

TEST(Cli, MissingTensor) {
  const fs::path p = patched(synth("tiny-i2_s.gguf", "i2_s"), "missing.gguf", "blk.1.ffn_down.weight", "blk.1.ffn_dowX.weight");
  expect_clean_error(run_cli("run -m " + p.string() + " -p hi"), "missing tensor blk.1.ffn_down.weight");
}

// Rewrites the tensor info that follows `name`: n_dims (u32), ne (u64 each), type (u32).
fs::path patch_tensor_info(const fs::path& src, const std::string& out, const std::string& name,
                           int64_t new_ne0, int32_t new_type) {
  std::string bytes = slurp(src);
  const size_t at = bytes.find(name);
  EXPECT_NE(at, std::string::npos);
  size_t pos = at + name.size();
  uint32_t n_dims;
  std::memcpy(&n_dims, &bytes[pos], 4);
  pos += 4;
  if (new_ne0 > 0) std::memcpy(&bytes[pos], &new_ne0, 8);
  pos += 8 * n_dims;
  if (new_type >= 0) std::memcpy(&bytes[pos], &new_type, 4);
  const fs::path p = temp_dir() / out;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

TEST(Cli, WrongShape) {
  const fs::path p = patch_tensor_info(synth("tiny-f32.gguf", "f32"), "shape.gguf", "blk.0.ffn_down.weight", 384, -1);
  expect_clean_error(run_cli("run -m " + p.string() + " -p hi"), "blk.0.ffn_down.weight has shape [384, 256]");
}

TEST(Cli, UnsupportedType) {
  // F32 -> Q4_K (id 12) shrinks the tensor, so the file stays self-consistent.
  const fs::path p = patch_tensor_info(synth("tiny-f32.gguf", "f32"), "type.gguf", "blk.0.ffn_down.weight", -1, 12);
  expect_clean_error(run_cli("run -m " + p.string() + " -p hi"), "has type q4_K, which this engine does not run");
}

TEST(Cli, PromptLongerThanContext) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "word ";
  expect_clean_error(run_cli("run -m " + model.string() + " -c 16 -p '" + prompt + "'"), "context");
}

TEST(Cli, WrongFlags) {
  const Output bogus = run_cli("run --bogus");
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.err.find("error: "), std::string::npos);
  expect_clean_error(run_cli("frobnicate"), "frobnicate");
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  expect_clean_error(run_cli("run -m " + model.string() + " --device tpu"), "unknown device 'tpu'");
  expect_clean_error(run_cli("run -m " + model.string() + " --top-p 2"), "top-p");
  expect_clean_error(run_cli("logits -m " + model.string() + " --ids 1,99999 -o " + (temp_dir() / "l.f32").string()), "outside the vocabulary");
}

TEST(Cli, LogitsWritesTheGoldenFormat) {
  const fs::path model = test::shared_dir() / "models/stories260K-v1.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << "missing test data: " << model;
  const fs::path out = temp_dir() / "logits.f32";
  const Output o = run_cli("logits -m " + model.string() + " --ids 1,403,407 -o " + out.string());
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("n_vocab=512 n_tokens=3 ids=1,403,407"), std::string::npos) << o.out;
  EXPECT_EQ(fs::file_size(out), 3u * 512u * 4u);
}

TEST(Cli, PerplexityPrintsPpl) {
  const fs::path model = test::shared_dir() / "models/stories260K-v1.gguf";
  const fs::path text = test::shared_dir() / "golden/llamacpp/story.txt";
  if (!fs::exists(model) || !fs::exists(text)) GTEST_SKIP() << "missing test data under " << test::shared_dir();
  const Output o = run_cli("perplexity -m " + model.string() + " -f " + text.string() + " -c 128");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("PPL = 3.30"), std::string::npos) << o.out;
}

TEST(Cli, TokenizeRecognisesSpecialTokens) {
  const fs::path model = test::shared_dir() / "golden/llamacpp/tiny-bitnet-f32.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << "missing test data: " << model;
  const Output o = run_cli("tokenize -m " + model.string() + " -p 'Once upon' --ids");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, "510,79,110,99,101,32,117,112,450\n");
}

TEST(Cli, InspectShowsArchitectureAndTensors) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const Output o = run_cli("inspect " + model.string());
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("arch bitnet-b1.58"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("ffn relu2"), std::string::npos);
  EXPECT_NE(o.out.find("blk.1.ffn_down.weight"), std::string::npos);
  EXPECT_NE(o.out.find("i2_s"), std::string::npos);
}

}  // namespace
}  // namespace bitnet

namespace bitnet {
namespace {

TEST(CliDevices, ListsEveryBackendAsTextAndJson) {
  const Output text = run_cli("devices");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char* b : {"cpu: available", "cuda:", "hip:", "vulkan:", "opencl:"}) {
    EXPECT_NE(text.out.find(b), std::string::npos) << b << " in " << text.out;
  }
  const Output json = run_cli("devices --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j[0]["backend"], "cpu");
  EXPECT_EQ(j[0]["devices"][0]["id"], "cpu-scalar");
  for (const auto& b : j) {
    if (!b["available"].get<bool>()) EXPECT_FALSE(b["reason"].get<std::string>().empty()) << b.dump();
  }
}

TEST(CliDevices, FakeGpusAreSelectedThenFallBackAndStrictIgnoresThem) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  setenv("BITNET_GPU_FAKE", "cuda,rocm", 1);
  const Output faked = run_cli("run -m " + model.string() + " -p hi -n 2 --temp 0");
  const Output listed = run_cli("devices");
  setenv("BITNET_STRICT_MODE", "1", 1);
  const Output strict = run_cli("run -m " + model.string() + " -p hi -n 2 --temp 0");
  unsetenv("BITNET_STRICT_MODE");
  unsetenv("BITNET_GPU_FAKE");
  ASSERT_EQ(faked.exit_code, 0) << faked.err;
  EXPECT_NE(faked.err.find("detected=[cpu-scalar"), std::string::npos) << faked.err;
  EXPECT_NE(faked.err.find("cuda:fake0"), std::string::npos) << faked.err;
  EXPECT_NE(faked.err.find("fallback: cuda:fake0 -> cpu-scalar"), std::string::npos) << faked.err;
  EXPECT_NE(faked.err.find("selected=cpu-scalar"), std::string::npos) << faked.err;
  EXPECT_NE(listed.out.find("(fake)"), std::string::npos) << listed.out;
  ASSERT_EQ(strict.exit_code, 0) << strict.err;
  EXPECT_EQ(strict.err.find("fake"), std::string::npos) << strict.err;
  EXPECT_NE(strict.err.find(" strict"), std::string::npos) << strict.err;
}

TEST(CliDevices, DeviceFlagEnvironmentAndStrictMode) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  setenv("BITNET_DEVICE", "cpu", 1);
  const Output from_env = run_cli("run -m " + model.string() + " -p hi -n 2 --temp 0");
  unsetenv("BITNET_DEVICE");
  ASSERT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_NE(from_env.err.find("requested=cpu "), std::string::npos) << from_env.err;

  // An unavailable device falls back to the CPU with the reason logged ...
  const Output cuda = run_cli("run -m " + model.string() + " -p hi -n 2 --temp 0 --device cuda");
  ASSERT_EQ(cuda.exit_code, 0) << cuda.err;
  EXPECT_NE(cuda.err.find("note: no cuda device"), std::string::npos) << cuda.err;
  EXPECT_NE(cuda.err.find("selected=cpu-scalar"), std::string::npos) << cuda.err;
  // ... and is an error in strict mode.
  setenv("BITNET_STRICT_MODE", "1", 1);
  const Output strict = run_cli("run -m " + model.string() + " -p hi -n 2 --temp 0 --device cuda");
  unsetenv("BITNET_STRICT_MODE");
  expect_clean_error(strict, "strict mode");
  setenv("BITNET_GPU_DEVICE", "abc", 1);
  const Output bad_index = run_cli("run -m " + model.string() + " -p hi -n 2");
  unsetenv("BITNET_GPU_DEVICE");
  expect_clean_error(bad_index, "BITNET_GPU_DEVICE");
}

TEST(CliDevices, SuspiciousWeightsWarnOrFailWithExitCode8) {
  // A norm of 256 zeros (the synthetic model's norms are all 1.0f).
  const std::string ones = [] {
    std::string s;
    for (int i = 0; i < 256; ++i) s += std::string("\x00\x00\x80\x3f", 4);
    return s;
  }();
  const fs::path p = patched(synth("tiny-f32.gguf", "f32"), "zero-norm.gguf", ones, std::string(ones.size(), '\0'));
  const Output warn = run_cli("run -m " + p.string() + " -p hi -n 2 --temp 0");
  ASSERT_EQ(warn.exit_code, 0) << warn.err;
  EXPECT_NE(warn.err.find("warning: suspicious weight"), std::string::npos) << warn.err;
  setenv("BITNET_STRICT_MODE", "1", 1);
  const Output strict = run_cli("run -m " + p.string() + " -p hi -n 2 --temp 0");
  unsetenv("BITNET_STRICT_MODE");
  EXPECT_EQ(strict.exit_code, 8) << strict.err;
  EXPECT_NE(strict.err.find("error: suspicious weights"), std::string::npos) << strict.err;
}

TEST(CliDevices, ReceiptRecordsWhatRan) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const fs::path receipt = temp_dir() / "receipt.json";
  const Output o = run_cli("run -m " + model.string() + " -p hello -n 5 --temp 0 --receipt " + receipt.string());
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(slurp(receipt));
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["compute_path"], "real");
  EXPECT_EQ(j["request"]["device"], "auto");
  EXPECT_EQ(j["selected"], "cpu-scalar");
  EXPECT_EQ(j["backend"]["backend"], "cpu");
  EXPECT_EQ(j["tokens"]["generated"], 5);
  EXPECT_GT(j["tokens"]["prompt"].get<int>(), 0);
  EXPECT_EQ(j["model"]["architecture"], "bitnet-b1.58");
  EXPECT_EQ(j["model"]["file_sha256"].get<std::string>().size(), 64u);
  EXPECT_NE(j["model"]["weight_types"].get<std::string>().find("i2_s"), std::string::npos);
  const auto kernels = j["kernels"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(kernels.begin(), kernels.end(), "matmul_w2a8_scalar"), kernels.end()) << j["kernels"].dump();
  EXPECT_TRUE(j["fallbacks"].empty());
  EXPECT_GE(j["timings"]["generate_tokens_per_second"].get<double>(), 0.0);
}

}  // namespace
}  // namespace bitnet
