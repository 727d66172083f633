#include <chrono>
#include <cstdio>
#include <random>

#include "commands.h"

namespace bitnet::cli {

namespace {

struct RunFlags {
  ModelFlags model;
  std::string prompt;
  int64_t n_predict = 128;
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
  const Status s = engine->generate(f.prompt, sampling, f.n_predict,
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
  cmd->add_option("-n,--n-predict", flags->n_predict, "tokens to generate (default: 128)")
      ->check(CLI::NonNegativeNumber);
  SamplingParams& s = flags->sampling;
  cmd->add_option("--temp", s.temperature, "temperature; 0 = greedy (default: 0.8)");
  cmd->add_option("--top-k", s.top_k, "top-k sampling; 0 = off (default: 40)");
  cmd->add_option("--top-p", s.top_p, "top-p (nucleus) sampling; 1 = off (default: 0.95)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", s.min_p, "min-p sampling; 0 = off (default: 0.05)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty; 1 = off (default: 1.0)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--repeat-last-n", s.repeat_last_n, "tokens the penalty looks back over (default: 64)");
  cmd->add_option("--seed", flags->seed, "random seed (default: random, printed at the end)");
  cmd->callback([flags, &runner] { runner = [flags] { return run(*flags); }; });
}

}  // namespace bitnet::cli
