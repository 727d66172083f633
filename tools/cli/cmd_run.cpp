#include <chrono>
#include <cstdio>
#include <limits>
#include <random>

#include "commands.h"

namespace bitnet::cli {

namespace {

struct RunFlags {
  ModelFlags model;
  std::string prompt;
  int64_t n_predict = 128;  // -1: until the context is full
  SamplingParams sampling;
  int64_t seed = -1;
};

double per_second(int64_t n, double seconds) { return seconds > 0 ? static_cast<double>(n) / seconds : 0.0; }

int run(const RunFlags& f) {
  int code = 0;
  std::unique_ptr<Engine> engine = load_engine(f.model, code);
  if (!engine) return code;
  SamplingParams sampling = f.sampling;
  sampling.seed = f.seed >= 0 ? static_cast<uint64_t>(f.seed) : std::random_device{}();
  std::fputs(f.prompt.c_str(), stdout);
  std::fflush(stdout);
  GenerateStats stats;
  const int64_t n_predict = f.n_predict < 0 ? std::numeric_limits<int64_t>::max() : f.n_predict;
  const Status s = engine->generate(f.prompt, sampling, n_predict,
                                    [](std::string_view piece) {
                                      std::fwrite(piece.data(), 1, piece.size(), stdout);
                                      std::fflush(stdout);
                                    },
                                    &stats);
  std::fputc('\n', stdout);
  std::fflush(stdout);  // the text ends before the summary line on stderr
  if (!s.ok()) return fail(s);
  std::fprintf(stderr,
               "prompt: %lld tokens, %.2f tok/s | generated: %lld tokens, %.2f tok/s | stop: %s | "
               "seed: %llu\n",
               static_cast<long long>(stats.n_prompt), per_second(stats.n_prompt, stats.prompt_seconds),
               static_cast<long long>(stats.n_generated),
               per_second(stats.n_generated, stats.generate_seconds), stats.stop_reason.c_str(),
               static_cast<unsigned long long>(sampling.seed));
  return write_receipt(*engine, f.model, stats);
}

}  // namespace

void add_run_command(CLI::App& app, Runner& runner) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt (streams tokens as they come)");
  add_model_flags(*cmd, flags->model);
  cmd->add_option("-p,--prompt", flags->prompt, "prompt text (default: empty, i.e. BOS only)");
  add_number(*cmd, "-n,--n-predict", flags->n_predict, int64_t{-1}, kMaxTokens,
             "tokens to generate; -1 = until the context is full (default: 128)");
  add_sampling_flags(*cmd, flags->sampling, flags->seed);
  cmd->callback([flags, &runner] { runner = [flags] { return run(*flags); }; });
}

}  // namespace bitnet::cli
