// The `bitnet` command line: each subcommand registers its flags and a runner. Tools are
// thin: flags -> library calls -> output. Errors are one line on stderr and exit code 1 (2 for
// flag errors).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "bitnet/engine.h"

namespace bitnet::cli {

// Set by the chosen subcommand; returns the process exit code.
using Runner = std::function<int()>;

void add_run_command(CLI::App& app, Runner& runner);
void add_tokenize_command(CLI::App& app, Runner& runner);
void add_inspect_command(CLI::App& app, Runner& runner);
void add_logits_command(CLI::App& app, Runner& runner);
void add_perplexity_command(CLI::App& app, Runner& runner);
void add_synth_command(CLI::App& app, Runner& runner);
void add_devices_command(CLI::App& app, Runner& runner);
void add_bench_command(CLI::App& app, Runner& runner);  // tools/bench
void add_quantize_command(CLI::App& app, Runner& runner);
void add_serve_command(CLI::App& app, Runner& runner);
void add_chat_command(CLI::App& app, Runner& runner);

// Limits of the numeric flags (see flags.cpp). Threads above the hardware's count are
// clamped to it with a note; anything outside a flag's range is refused (exit 2).
inline constexpr int32_t kMaxThreads = 1024;
inline constexpr int64_t kMaxBatch = 4096;
inline constexpr int64_t kMaxTokens = int64_t{1} << 20;  // -c, -n, --top-k, --repeat-last-n

// Flags every model-loading command shares (-m, -t, -b, -c, --device, --receipt).
struct ModelFlags {
  std::string model;
  int n_threads = 0;
  int64_t n_batch = 512;
  int64_t n_ctx = 0;
  std::string device;  // empty: BITNET_DEVICE, then auto
  std::string head_type;  // empty: the head as stored
  std::string cache_type = "f16";  // KV cache elements: f16 | f32
  std::string receipt;
  int64_t kv_block = 0;  // paged KV cache block (serve); not a flag
};
void add_model_flags(CLI::App& cmd, ModelFlags& flags);
// -t, -b, --device, --head-type and --cache-type alone, for a command whose -c means something else
// (perplexity).
void add_device_flags(CLI::App& cmd, ModelFlags& flags);

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n and --seed (-1: random).
void add_sampling_flags(CLI::App& cmd, SamplingParams& sampling, int64_t& seed);

// A numeric flag that takes only numbers in [lo, hi] (appended to the help); text, NaN, inf,
// overflow and out-of-range values are flag errors naming the flag and the range.
template <typename T>
CLI::Option* add_number(CLI::App& cmd, const std::string& names, T& value, T lo, T hi, const std::string& help);
// The same for a comma-separated list, each number in [lo, hi].
template <typename T>
CLI::Option* add_number_list(CLI::App& cmd, const std::string& names, std::vector<T>& values, T lo, T hi,
                             const std::string& help);

// The environment the CLI reads (the library never does): BITNET_DEVICE, BITNET_GPU_BACKEND,
// BITNET_GPU_DEVICE, BITNET_STRICT_MODE, BITNET_GPU_FAKE. Errors are Status values.
Result<EngineOptions> engine_options_from_env(const ModelFlags& flags);

// Loads the engine (or the model, for several sessions) and prints the device line to stderr;
// prints the error and returns null on failure (`exit_code` is set to the code to exit with).
std::unique_ptr<Engine> load_engine(const ModelFlags& flags, int& exit_code);
std::unique_ptr<Model> load_model(const ModelFlags& flags, int& exit_code);

// Writes the receipt when --receipt was given; returns the exit code (0 or the error's).
int write_receipt(const Engine& engine, const ModelFlags& flags, const GenerateStats& stats);

// Prints "error: <message>" to stderr and returns the exit code for it (8 for suspicious
// weights in strict mode, 1 otherwise).
int fail(const Status& status);

}  // namespace bitnet::cli
