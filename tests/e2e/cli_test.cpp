// The `bitnet` command line on good and bad input: bad input gets one clear error line and a
// non-zero exit, never a crash or a hang.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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
    EXPECT_NE(o.err.find("requested=auto detected=[cpu] selected=cpu-scalar"), std::string::npos) << o.err;
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
  expect_clean_error(run_cli("run -m " + model.string() + " --device cuda"), "not compiled");
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
