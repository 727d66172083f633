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
  SamplingParams& s = flags->sampling;
  add_number(*cmd, "--temp", s.temperature, 0.0f, 100.0f, "temperature; 0 = greedy (default: 0.8)");
  add_number(*cmd, "--top-k", s.top_k, 0, static_cast<int32_t>(kMaxTokens), "top-k sampling; 0 = off (default: 40)");
  add_number(*cmd, "--top-p", s.top_p, 0.0f, 1.0f, "top-p (nucleus) sampling; 1 = off (default: 0.95)");
  add_number(*cmd, "--min-p", s.min_p, 0.0f, 1.0f, "min-p sampling; 0 = off (default: 0.05)");
  add_number(*cmd, "--repeat-penalty", s.repeat_penalty, 0.01f, 100.0f, "repetition penalty; 1 = off (default: 1.0)");
  add_number(*cmd, "--repeat-last-n", s.repeat_last_n, -1, static_cast<int32_t>(kMaxTokens),
             "tokens the penalty looks back over; -1 = all (default: 64)");
  add_number(*cmd, "--seed", flags->seed, int64_t{-1}, std::numeric_limits<int64_t>::max(),
             "random seed; -1 = random, printed at the end (default: -1)");
  cmd->callback([flags, &runner] { runner = [flags] { return run(*flags); }; });
}

}  // namespace bitnet::cli
