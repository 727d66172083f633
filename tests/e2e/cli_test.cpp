// The `bitnet` command line on good and bad input: bad input gets one clear error line and a
// non-zero exit, never a crash or a hang.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bitnet/devices.h"
#include "cli_util.h"
#include "golden_util.h"

namespace bitnet {
namespace {

namespace fs = std::filesystem;

// The CPU device's id on this machine ("cpu-" and the best kernel set it runs), as the library's
// probe names it.
std::string cpu_id() {
  for (const BackendDescription& b : list_devices({}))
    if (b.backend == "cpu" && !b.devices.empty()) return b.devices[0].id;
  return "cpu-?";
}

using test::Output;
using test::run_cli;
using test::slurp;
fs::path temp_dir() { return test::cli_temp_dir(); }

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
  for (const char* cmd : {"", "run", "tokenize", "inspect", "logits", "perplexity", "synth", "devices", "bench", "quantize", "chat"}) {
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
    EXPECT_NE(o.err.find("requested=auto detected=[" + cpu_id()), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("selected=" + cpu_id()), std::string::npos) << o.err;
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

// Each a clear error naming the file and the reason, for every command that opens a model;
// a FIFO must not block the open and /dev/zero must not be mapped.
TEST(Cli, ModelPathThatIsNotAModelFile) {
  const fs::path dir = temp_dir() / "dir.gguf";
  fs::create_directories(dir);
  const fs::path empty = temp_dir() / "empty.gguf";
  std::ofstream(empty).close();
  const fs::path fifo = temp_dir() / "fifo.gguf";
  if (!fs::exists(fifo)) {
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  }
  const fs::path loop = temp_dir() / "loop.gguf", loop2 = temp_dir() / "loop2.gguf";
  if (!fs::is_symlink(loop)) fs::create_symlink(loop2, loop);
  if (!fs::is_symlink(loop2)) fs::create_symlink(loop, loop2);
  const std::pair<std::string, std::string> cases[] = {
      {dir.string(), "is a directory"},
      {"/dev/zero", "is not a regular file (character device)"},
      {fifo.string(), "is not a regular file (FIFO)"},
      {empty.string(), "is empty"},
      {loop.string(), "Too many levels of symbolic links"},
      {"/nonexistent/model.gguf", "No such file or directory"},
  };
  const fs::path text = temp_dir() / "text.txt";
  std::ofstream(text) << "Once upon a time";
  for (const auto& [path, reason] : cases) {
    for (const std::string& cmd : std::vector<std::string>{"run -p hi -m ", "tokenize -p hi -m ", "inspect ",
                                                            "perplexity -f " + text.string() + " -m "}) {
      const Output o = run_cli(cmd + path);
      expect_clean_error(o, path + ": ");
      expect_clean_error(o, reason);
    }
  }
}

// The perplexity text is read whole, so /dev/zero or a FIFO would never end.
TEST(Cli, PerplexityTextThatIsNotARegularFile) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const fs::path fifo = temp_dir() / "text.fifo";
  if (!fs::exists(fifo)) {
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  }
  for (const std::string& path : {std::string("/dev/zero"), fifo.string(), temp_dir().string()}) {
    expect_clean_error(run_cli("perplexity -m " + model.string() + " -f " + path), path + ": is not a regular file");
  }
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
  // F32 -> Q8_1 (id 9, an activation type no backend runs as a weight) shrinks the tensor, so the
  // file stays self-consistent.
  const fs::path p = patch_tensor_info(synth("tiny-f32.gguf", "f32"), "type.gguf", "blk.0.ffn_down.weight", -1, 9);
  expect_clean_error(run_cli("run -m " + p.string() + " -p hi"), "has type q8_1, which this engine does not run");
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

// Bad values for every numeric flag of every command: one short error line naming the flag
// and its range, exit code 2, never a crash, a hang or an allocation of the requested size.
struct BadFlag {
  std::string flag;                 // as the error names it, e.g. "-n/--n-predict"
  std::vector<std::string> values;  // each one refused
};

void expect_refused(const std::string& base, const BadFlag& f) {
  const std::string name = f.flag.substr(f.flag.find('/') + 1);
  for (const std::string& v : f.values) {
    const Output o = run_cli(base + " " + name + " '" + v + "'");
    const std::string what = base.substr(0, base.find(' ')) + " " + name + " " + v;
    EXPECT_EQ(o.exit_code, 2) << what << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << what << ": " << o.err;
    EXPECT_EQ(o.err.rfind("error: " + f.flag + " must be ", 0), 0u) << what << ": " << o.err;
    EXPECT_NE(o.err.find(" in ["), std::string::npos) << what << ": " << o.err;
    EXPECT_LT(o.err.size(), 120u) << what << ": " << o.err;
  }
}

const std::vector<std::string> kNotNumbers = {"nan", "abc", "", "5x", "0x10"};
const std::vector<std::string> kNotFloats = {"nan", "inf", "abc", "", "1e999"};

std::vector<std::string> with(std::vector<std::string> values, const std::vector<std::string>& more) {
  values.insert(values.end(), more.begin(), more.end());
  return values;
}

TEST(CliFlags, EveryNumericFlagRefusesBadValues) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const std::string m = model.string();
  const std::string out = (temp_dir() / "flags.out").string();
  const std::vector<BadFlag> engine_flags = {
      {"-t/--threads", with({"-1", "1025", "100000", "99999999999999999999"}, kNotNumbers)},
      {"-b/--batch-size", with({"0", "-5", "4097", "99999999999999999999"}, kNotNumbers)},
  };
  const std::vector<BadFlag> ctx_flag = {{"-c/--ctx-size", with({"-1", "1048577", "99999999999999999999"}, kNotNumbers)}};
  const std::vector<BadFlag> run_flags = {
      {"-n/--n-predict", with({"-5", "-2", "1048577", "99999999999999999999"}, kNotNumbers)},
      {"--temp", with({"-0.5", "100.5", "1e30"}, kNotFloats)},
      {"--top-k", with({"-1", "1048577", "99999999999999999999"}, kNotNumbers)},
      {"--top-p", with({"-0.1", "1.01", "1e30"}, kNotFloats)},
      {"--min-p", with({"-0.1", "1.01", "1e30"}, kNotFloats)},
      {"--repeat-penalty", with({"0", "-1", "100.5", "1e30"}, kNotFloats)},
      {"--repeat-last-n", with({"-2", "1048577", "99999999999999999999"}, kNotNumbers)},
      {"--seed", with({"-2", "99999999999999999999"}, kNotNumbers)},
  };
  for (const std::string& base : {"run -p hi -m " + m, "tokenize -p hi -m " + m, "logits -p hi -o " + out + " -m " + m}) {
    for (const BadFlag& f : engine_flags) expect_refused(base, f);
    for (const BadFlag& f : ctx_flag) expect_refused(base, f);
  }
  for (const BadFlag& f : run_flags) expect_refused("run -p hi -m " + m, f);
  const std::string perplexity = "perplexity -f /dev/null -m " + m;
  for (const BadFlag& f : engine_flags) expect_refused(perplexity, f);
  expect_refused(perplexity, {"-c/--ctx-size", with({"0", "7", "-1", "1048577", "99999999999999999999"}, kNotNumbers)});
  expect_refused("logits -o " + out + " -m " + m,
                 {"--ids", with({"-1", "1,-3", "2147483648", "99999999999999999999"}, kNotNumbers)});
  const std::string synth_base = "synth -o " + out;
  expect_refused(synth_base, {"--seed", with({"-1", "99999999999999999999"}, kNotNumbers)});
  for (const auto& [flag, max] : std::vector<std::pair<std::string, std::string>>{
           {"--n-vocab", "262145"}, {"--n-embd", "16385"}, {"--n-layer", "257"},
           {"--n-head", "257"}, {"--n-head-kv", "257"}, {"--n-ff", "65537"}}) {
    expect_refused(synth_base, {flag, with({"-1", max, "99999999999999999999"}, kNotNumbers)});
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST(CliFlags, ThreadsAboveTheHardwareAreClamped) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw == 0 || hw >= 1024) GTEST_SKIP() << "hardware thread count unknown or too large: " << hw;
  const Output o = run_cli("run -m " + model.string() + " -p hi -n 2 --temp 0 -t 1024");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("note: -t 1024 is more than the " + std::to_string(hw) + " hardware threads; using " +
                       std::to_string(hw)), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("threads=" + std::to_string(hw) + " "), std::string::npos) << o.err;
}

TEST(CliFlags, NPredictMinusOneRunsUntilTheContextIsFull) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const Output o = run_cli("run -m " + model.string() + " -p hi -n -1 -c 24 --temp 1 --seed 3");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(o.err.find("stop: context") != std::string::npos || o.err.find("stop: eog") != std::string::npos) << o.err;
}

TEST(Cli, HeadTypeRequantizesTheHeadOrIsRefused) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const Output q8 = run_cli("run -m " + model.string() + " -p hi -n 4 --temp 0 --head-type q8_0");
  ASSERT_EQ(q8.exit_code, 0) << q8.err;
  EXPECT_NE(q8.err.find("to q8_0"), std::string::npos) << q8.err;
  const Output bogus = run_cli("run -m " + model.string() + " -p hi --head-type q5");
  EXPECT_EQ(bogus.exit_code, 2) << bogus.err;
  EXPECT_NE(bogus.err.find("--head-type"), std::string::npos) << bogus.err;
  const fs::path text = temp_dir() / "head_type.txt";
  std::ofstream(text) << "Once upon a time there was a little cat. The cat liked to sleep in the sun all day long.";
  const Output ppl = run_cli("perplexity -m " + model.string() + " -f " + text.string() + " --head-type q6_K -c 8");
  ASSERT_EQ(ppl.exit_code, 0) << ppl.err;
  EXPECT_NE(ppl.err.find("to q6_K"), std::string::npos) << ppl.err;
}

// --cache-type: f16 by default, f32 on request, shown on the device line, in the receipt and
// the kernels; any other value is a flag error on every model-loading command. A GPU backend
// that keeps F32 says so in one line.
TEST(Cli, CacheTypeIsRecordedAndCheckedOnEveryModelCommand) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const fs::path receipt = temp_dir() / "cache_type.json";
  for (const std::string type : {"f16", "f32"}) {
    const std::string flag = type == "f16" ? "" : " --cache-type f32";  // f16: the default
    const Output o = run_cli("run -m " + model.string() + " -p hello -n 3 --temp 0 --receipt " + receipt.string() + flag);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.err.find(" kv=" + type), std::string::npos) << o.err;
    const auto j = nlohmann::json::parse(slurp(receipt));
    EXPECT_EQ(j["request"]["cache_type"], type);
    EXPECT_EQ(j["stats"]["kv_type"], type);
    const auto kernels = j["kernels"].get<std::vector<std::string>>();
    EXPECT_NE(std::find(kernels.begin(), kernels.end(), "attention_" + type + "_" + cpu_id().substr(4)), kernels.end())
        << j["kernels"].dump();
    const Output bench = run_cli("bench -m " + model.string() + " -p 4 -n 2 -t 1 -r 1 -o json" + flag);
    ASSERT_EQ(bench.exit_code, 0) << bench.err;
    for (const auto& row : nlohmann::json::parse(bench.out)) {
      EXPECT_EQ(row["type_k"], type);
      EXPECT_EQ(row["type_v"], type);
    }
  }
  const fs::path text = temp_dir() / "cache_type.txt";
  std::ofstream(text) << "Once upon a time there was a little cat. The cat liked to sleep in the sun all day long.";
  const std::vector<std::string> commands = {"run -p hi", "logits -p hi -o " + (temp_dir() / "l.f32").string(),
                                             "tokenize -p hi", "perplexity -f " + text.string(), "bench -p 4 -n 2 -r 1"};
  for (const std::string& cmd : commands) {
    const std::string sub = cmd.substr(0, cmd.find(' '));
    const Output bad = run_cli(sub + " -m " + model.string() + cmd.substr(cmd.find(' ')) + " --cache-type q8_0");
    EXPECT_EQ(bad.exit_code, 2) << cmd << ": " << bad.err;
    EXPECT_NE(bad.err.find("--cache-type"), std::string::npos) << cmd << ": " << bad.err;
  }
  const Output cl = run_cli("run -m " + model.string() + " -p hi -n 2 --device opencl");
  if (cl.exit_code == 0 && cl.err.find("selected=opencl") != std::string::npos) {
    EXPECT_NE(cl.err.find(": F16 KV cache not supported, using F32"), std::string::npos) << cl.err;
    EXPECT_NE(cl.err.find(" kv=f32"), std::string::npos) << cl.err;
  }
}

// `bitnet bench -o json`: llama-bench's field names, one row per (head type, threads, test),
// each with a measured rate; decode rows carry the bytes read per token and the GB/s.
TEST(CliBench, JsonHasOneRowPerHeadThreadsAndTest) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const Output o = run_cli("bench -m " + model.string() + " -p 8 -n 4 -t 1,2 -r 1 -o json --head-type f16 --head-type q8_0");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto rows = nlohmann::json::parse(o.out);
  ASSERT_EQ(rows.size(), 8u) << o.out;
  int prompt_rows = 0;
  for (const auto& r : rows) {
    EXPECT_EQ(r["backends"], cpu_id());
    EXPECT_GT(r["avg_ts"].get<double>(), 0.0) << r.dump();
    EXPECT_EQ(r["samples_ts"].size(), 1u);
    EXPECT_TRUE(r["head_type"] == "f16" || r["head_type"] == "q8_0") << r.dump();
    if (r["n_prompt"] == 8) {
      ++prompt_rows;
      EXPECT_EQ(r["n_gen"], 0);
    } else {
      EXPECT_EQ(r["n_gen"], 4);
      EXPECT_GT(r["bytes_per_token"].get<double>(), 0.0);
      EXPECT_GT(r["gbps"].get<double>(), 0.0);
      // The host's bandwidth read around the one run: its bound, and the fraction against it.
      ASSERT_EQ(r["membw_samples_gbps"].size(), 1u) << r.dump();
      EXPECT_GT(r["membw_samples_gbps"][0].get<double>(), 0.0);
      EXPECT_DOUBLE_EQ(r["membw_gbps"].get<double>(), r["membw_samples_gbps"][0].get<double>());
      EXPECT_DOUBLE_EQ(r["membw_fraction"].get<double>(), r["gbps"].get<double>() / r["membw_gbps"].get<double>());
    }
  }
  EXPECT_EQ(prompt_rows, 4);
  // A Q8_0 head makes the model smaller than an F16 one.
  double f16_size = 0, q8_size = 0;
  for (const auto& r : rows) (r["head_type"] == "f16" ? f16_size : q8_size) = r["model_size"].get<double>();
  EXPECT_LT(q8_size, f16_size);
}

// `bitnet bench -m MODEL ARGS -t 1 -r REPS -o json`: its rows, or an empty array (and a failure)
// when it fails or gives another number of rows than n_rows.
nlohmann::json bench_rows(const fs::path& model, const std::string& args, size_t n_rows, int reps = 1) {
  const Output o = run_cli("bench -m " + model.string() + " " + args + " -t 1 -r " + std::to_string(reps) + " -o json");
  if (o.exit_code != 0) {
    ADD_FAILURE() << args << ": exit " << o.exit_code << ": " << o.err;
    return nlohmann::json::array();
  }
  auto rows = nlohmann::json::parse(o.out);
  if (rows.size() != n_rows) {
    ADD_FAILURE() << args << ": " << rows.size() << " rows, expected " << n_rows << ": " << o.out;
    return nlohmann::json::array();
  }
  return rows;
}

// A decode row's bandwidth is read before every run and after the last: one bound per run.
TEST(CliBench, EachRunHasItsOwnBandwidthBound) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const auto rows = bench_rows(model, "-p 0 -n 4", 1, 3);
  ASSERT_EQ(rows.size(), 1u);
  const auto& bounds = rows[0]["membw_samples_gbps"];
  ASSERT_EQ(bounds.size(), 3u) << rows.dump();
  double sum = 0;
  for (const auto& b : bounds) {
    EXPECT_GT(b.get<double>(), 0.0);
    sum += b.get<double>();
  }
  EXPECT_NEAR(rows[0]["membw_gbps"].get<double>(), sum / 3, 1e-9);
  EXPECT_GT(rows[0]["membw_fraction"].get<double>(), 0.0);
}

// -p 0 / -n 0 leave out that kind of test, as llama-bench; both 0 is an error, not a crash.
TEST(CliBench, ZeroLengthsLeaveThatTestOut) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const auto rows = bench_rows(model, "-p 0 -n 4", 1);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["n_prompt"], 0);
  EXPECT_EQ(rows[0]["n_gen"], 4);
  const auto prow = bench_rows(model, "-p 8,0 -n 0", 1);
  ASSERT_EQ(prow.size(), 1u);
  EXPECT_EQ(prow[0]["n_prompt"], 8);
  const Output nothing = run_cli("bench -m " + model.string() + " -p 0 -n 0 -r 1");
  EXPECT_EQ(nothing.exit_code, 2) << nothing.err;
  EXPECT_NE(nothing.err.find("nothing to measure"), std::string::npos) << nothing.err;
}

// --parallel N: decode rows with N sequences stepped together, their summed t/s and the GB/s of
// one weight pass per step plus each sequence's cache positions (n_gen 4 from BOS: 2.5 on
// average); without 1 in the list the plain tg row is left out; 0 is an error.
TEST(CliBench, ParallelDecodeRows) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const auto rows = bench_rows(model, "-p 0 -n 4 --parallel 1,3", 2);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["n_parallel"], 1);
  EXPECT_EQ(rows[1]["n_parallel"], 3);
  for (const auto& r : rows) {
    EXPECT_EQ(r["n_gen"], 4);
    EXPECT_GT(r["avg_ts"].get<double>(), 0.0) << r.dump();
    const double steps_per_s = r["avg_ts"].get<double>() / r["n_parallel"].get<double>();
    EXPECT_GT(r["kv_bytes_per_pos"].get<double>(), 0.0) << r.dump();
    const double step_bytes = r["bytes_per_token"].get<double>() + r["n_parallel"].get<double>() * r["kv_bytes_per_pos"].get<double>() * 2.5;
    EXPECT_NEAR(r["gbps"].get<double>(), step_bytes * steps_per_s / 1e9, 1e-9) << r.dump();
  }
  const Output md = run_cli("bench -m " + model.string() + " -p 0 -n 4 --np 2 -t 1 -r 1");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| tg4 np2 |"), std::string::npos) << md.out;
  EXPECT_EQ(md.out.find("| tg4 |"), std::string::npos) << md.out;
  const Output zero = run_cli("bench -m " + model.string() + " --parallel 0 -r 1");
  EXPECT_EQ(zero.exit_code, 2) << zero.err;
  EXPECT_NE(zero.err.find("--parallel"), std::string::npos) << zero.err;
}

// -d: each pp and tg test after that many tokens of context, named as llama-bench names them.
TEST(CliBench, DepthRows) {
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const auto rows = bench_rows(model, "-p 8 -n 4 -d 0,24", 4);
  ASSERT_EQ(rows.size(), 4u);
  const int depths[] = {0, 0, 24, 24};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["n_depth"], depths[i]) << rows[i].dump();
    EXPECT_EQ(rows[i]["n_prompt"], i % 2 == 0 ? 8 : 0) << rows[i].dump();
    EXPECT_GT(rows[i]["avg_ts"].get<double>(), 0.0) << rows[i].dump();
  }
  const Output md = run_cli("bench -m " + model.string() + " -p 8 -n 4 -d 24 -t 1 -r 1");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| pp8 @ d24 |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| tg4 @ d24 |"), std::string::npos) << md.out;
  const Output bad = run_cli("bench -m " + model.string() + " -d 20000 -r 1");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("-d"), std::string::npos) << bad.err;
}

TEST(CliBench, BadInputIsAOneLineError) {
  expect_clean_error(run_cli("bench -m " + (temp_dir() / "missing.gguf").string() + " -p 8 -n 4 -r 1"), "missing.gguf");
  const fs::path model = synth("tiny-i2_s.gguf", "i2_s");
  const Output threads = run_cli("bench -m " + model.string() + " -t 0,x -r 1");
  EXPECT_EQ(threads.exit_code, 2) << threads.err;
  const Output reps = run_cli("bench -m " + model.string() + " -r 0");
  EXPECT_EQ(reps.exit_code, 2) << reps.err;
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

// stories260K requantized to Q8_0 still tells its story (greedy), and to Q4_K its perplexity
// stays within a few percent of the F32 file's 3.30; bad types are refused by name.
TEST(Cli, QuantizeWritesARunnableModel) {
  const fs::path model = test::shared_dir() / "models/stories260K-v1.gguf";
  const fs::path text = test::shared_dir() / "golden/llamacpp/story.txt";
  if (!fs::exists(model) || !fs::exists(text)) GTEST_SKIP() << "missing test data under " << test::shared_dir();
  const fs::path q8 = temp_dir() / "stories-q8_0.gguf";
  Output o = run_cli("quantize " + model.string() + " " + q8.string() + " q8_0 -t 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("wrote " + q8.string()), std::string::npos) << o.err;
  o = run_cli("run -m " + q8.string() + " -n 12 --temp 0 -t 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out.rfind("Once upon a time, there was a little girl", 0), 0u) << o.out;
  const fs::path q4 = temp_dir() / "stories-q4_k.gguf";
  o = run_cli("quantize " + model.string() + " " + q4.string() + " Q4_K");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("fallback"), std::string::npos) << o.err;  // 64-wide rows are no 256-blocks
  o = run_cli("perplexity -m " + q4.string() + " -f " + text.string() + " -c 128");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const size_t at = o.out.find("PPL = ");
  ASSERT_NE(at, std::string::npos) << o.out;
  const double ppl = std::stod(o.out.substr(at + 6));
  EXPECT_GT(ppl, 3.25);
  EXPECT_LT(ppl, 3.60);
  expect_clean_error(run_cli("quantize " + model.string() + " " + q4.string() + " q3_k_m"), "unknown quantization type 'q3_k_m'");
  expect_clean_error(run_cli("quantize " + model.string() + " " + model.string() + " q8_0"), "is the input");
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
  EXPECT_EQ(j[0]["devices"][0]["id"], cpu_id());
  for (const auto& b : j) {
    if (!b["available"].get<bool>()) {
      EXPECT_FALSE(b["reason"].get<std::string>().empty()) << b.dump();
    }
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
  EXPECT_NE(faked.err.find("detected=[" + cpu_id()), std::string::npos) << faked.err;
  EXPECT_NE(faked.err.find("cuda:fake0"), std::string::npos) << faked.err;
  EXPECT_NE(faked.err.find("fallback: cuda:fake0 -> " + cpu_id()), std::string::npos) << faked.err;
  EXPECT_NE(faked.err.find("selected=" + cpu_id()), std::string::npos) << faked.err;
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
  EXPECT_NE(cuda.err.find("selected=" + cpu_id()), std::string::npos) << cuda.err;
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
  EXPECT_EQ(j["selected"], cpu_id());
  EXPECT_EQ(j["backend"]["backend"], "cpu");
  EXPECT_EQ(j["tokens"]["generated"], 5);
  EXPECT_GT(j["tokens"]["prompt"].get<int>(), 0);
  EXPECT_EQ(j["model"]["architecture"], "bitnet-b1.58");
  EXPECT_EQ(j["model"]["file_sha256"].get<std::string>().size(), 64u);
  EXPECT_NE(j["model"]["weight_types"].get<std::string>().find("i2_s"), std::string::npos);
  const auto kernels = j["kernels"].get<std::vector<std::string>>();
  // matmul_w2a8_<set>, or matmul_w2a8_t5_<set> where the set reads the 1.6-bit T5 layout.
  const std::string set = cpu_id().substr(4);
  EXPECT_TRUE(std::find(kernels.begin(), kernels.end(), "matmul_w2a8_" + set) != kernels.end() ||
              std::find(kernels.begin(), kernels.end(), "matmul_w2a8_t5_" + set) != kernels.end())
      << j["kernels"].dump();
  EXPECT_TRUE(j["fallbacks"].empty());
  EXPECT_GE(j["timings"]["generate_tokens_per_second"].get<double>(), 0.0);
}

}  // namespace
}  // namespace bitnet
