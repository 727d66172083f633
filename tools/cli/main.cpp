#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

#include "commands.h"
#include "core/env.h"

namespace bitnet::cli {

void add_model_flags(CLI::App& cmd, ModelFlags& flags) {
  cmd.add_option("-m,--model", flags.model, "GGUF model file")->required();
  add_number(cmd, "-c,--ctx-size", flags.n_ctx, int64_t{0}, kMaxTokens, "context length; 0 = the model's (default: 0)");
  add_device_flags(cmd, flags);
  cmd.add_option("--receipt", flags.receipt, "write a JSON receipt of what really ran to this file");
}

void add_device_flags(CLI::App& cmd, ModelFlags& flags) {
  add_number(cmd, "-t,--threads", flags.n_threads, 0, kMaxThreads,
             "CPU threads; 0 = every hardware thread; more than the hardware has are clamped to it (default: 0)");
  add_number(cmd, "-b,--batch-size", flags.n_batch, int64_t{1}, kMaxBatch, "prompt tokens per forward step (default: 512)");
  cmd.add_option("--device", flags.device,
                 "auto|cpu|gpu|cuda|hip|opencl|vulkan (default: $BITNET_DEVICE, else auto)");
  cmd.add_option("--head-type", flags.head_type,
                 "requantize the output head (tied: the embedding too) at load: f16|q8_0|q6_K (default: as stored)")
      ->check(CLI::IsMember({"f16", "q8_0", "q6_K", "q6_k"}));
  cmd.add_option("--cache-type", flags.cache_type,
                 "KV cache element type: f16|f32 (default: f16; a GPU backend without F16 kernels keeps f32 and says so)")
      ->check(CLI::IsMember({"f16", "f32"}));
}

void add_sampling_flags(CLI::App& cmd, SamplingParams& s, int64_t& seed) {
  add_number(cmd, "--temp", s.temperature, 0.0f, 100.0f, "temperature; 0 = greedy (default: 0.8)");
  add_number(cmd, "--top-k", s.top_k, 0, static_cast<int32_t>(kMaxTokens), "top-k sampling; 0 = off (default: 40)");
  add_number(cmd, "--top-p", s.top_p, 0.0f, 1.0f, "top-p (nucleus) sampling; 1 = off (default: 0.95)");
  add_number(cmd, "--min-p", s.min_p, 0.0f, 1.0f, "min-p sampling; 0 = off (default: 0.05)");
  add_number(cmd, "--repeat-penalty", s.repeat_penalty, 0.01f, 100.0f, "repetition penalty; 1 = off (default: 1.0)");
  add_number(cmd, "--repeat-last-n", s.repeat_last_n, -1, static_cast<int32_t>(kMaxTokens),
             "tokens the penalty looks back over; -1 = all (default: 64)");
  add_number(cmd, "--seed", seed, int64_t{-1}, std::numeric_limits<int64_t>::max(),
             "random seed; -1 = random, printed at the end (default: -1)");
}

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return status.code() == StatusCode::kSuspiciousWeights ? 8 : 1;
}

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// More threads than the hardware runs only add contention (the pool's workers spin).
int clamp_threads(int n_threads) {
  const int n_hw = static_cast<int>(std::thread::hardware_concurrency());
  if (n_hw == 0 || n_threads <= n_hw) return n_threads;
  std::fprintf(stderr, "note: -t %d is more than the %d hardware threads; using %d\n", n_threads, n_hw, n_hw);
  return n_hw;
}

}  // namespace

Result<EngineOptions> engine_options_from_env(const ModelFlags& flags) {
  EngineOptions o;
  o.model_path = flags.model;
  o.n_threads = flags.n_threads;
  o.n_batch = flags.n_batch;
  o.n_ctx = flags.n_ctx;
  o.head_type = flags.head_type;
  o.cache_type = flags.cache_type;
  o.kv_block = flags.kv_block;
  o.device = !flags.device.empty() ? flags.device : !env("BITNET_DEVICE").empty() ? env("BITNET_DEVICE") : "auto";
  o.gpu_backend = env("BITNET_GPU_BACKEND");
  o.cpu_isa = env("BITNET_CPU_ISA");
  if (const std::string idx = env("BITNET_GPU_DEVICE"); !idx.empty()) {
    char* end = nullptr;
    const long v = std::strtol(idx.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > 1024) return invalid_argument("BITNET_GPU_DEVICE must be a device index, got '" + idx + "'");
    o.gpu_device = static_cast<int>(v);
  }
  o.strict = env_flag("BITNET_STRICT_MODE");
  std::string fakes = env("BITNET_GPU_FAKE");
  for (size_t pos = 0; !fakes.empty() && pos <= fakes.size();) {
    const size_t comma = std::min(fakes.find(',', pos), fakes.size());
    if (comma > pos) o.fake_gpus.push_back(fakes.substr(pos, comma - pos));
    pos = comma + 1;
  }
  o.log = [](std::string_view line) { std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data()); };
  return o;
}

namespace {

// Model::load or Engine::load, with the device line.
template <class Loaded>
std::unique_ptr<Loaded> load_with_flags(const ModelFlags& flags, int& exit_code) {
  auto options = engine_options_from_env(flags);
  if (!options.ok()) {
    exit_code = fail(options.status());
    return nullptr;
  }
  options->n_threads = clamp_threads(options->n_threads);
  auto loaded = Loaded::load(*options);
  if (!loaded.ok()) {
    exit_code = fail(loaded.status());
    return nullptr;
  }
  std::fprintf(stderr, "%s threads=%d n_ctx=%lld kv=%s%s\n", (*loaded)->device_summary().c_str(),
               (*loaded)->n_threads(), static_cast<long long>((*loaded)->n_ctx()), (*loaded)->kv_type().c_str(),
               options->strict ? " strict" : "");
  exit_code = 0;
  return std::move(loaded).value();
}

}  // namespace

std::unique_ptr<Engine> load_engine(const ModelFlags& flags, int& exit_code) {
  return load_with_flags<Engine>(flags, exit_code);
}

std::unique_ptr<Model> load_model(const ModelFlags& flags, int& exit_code) {
  return load_with_flags<Model>(flags, exit_code);
}

int write_receipt(const Engine& engine, const ModelFlags& flags, const GenerateStats& stats) {
  if (flags.receipt.empty()) return 0;
  auto json = engine.receipt_json(stats);
  if (!json.ok()) return fail(json.status());
  std::FILE* f = std::fopen(flags.receipt.c_str(), "w");
  if (f == nullptr) return fail(io_error(flags.receipt + ": cannot open for writing"));
  const bool ok = std::fwrite(json->data(), 1, json->size(), f) == json->size() && std::fputc('\n', f) != EOF;
  if (std::fclose(f) != 0 || !ok) return fail(io_error(flags.receipt + ": cannot write"));
  return 0;
}

}  // namespace bitnet::cli

int main(int argc, char** argv) {
  using namespace bitnet::cli;
  CLI::App app{"bitnet: inference for BitNet b1.58 (ternary) and llama GGUF models"};
  app.require_subcommand(1);
  Runner runner;
  add_run_command(app, runner);
  add_tokenize_command(app, runner);
  add_inspect_command(app, runner);
  add_logits_command(app, runner);
  add_perplexity_command(app, runner);
  add_synth_command(app, runner);
  add_serve_command(app, runner);
  add_devices_command(app, runner);
  add_bench_command(app, runner);
  add_quantize_command(app, runner);
  add_chat_command(app, runner);
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::fprintf(stderr, "error: unknown command '%s' (commands: %s)\n", argv[1], names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 2;
  }
  return runner ? runner() : 2;
}
