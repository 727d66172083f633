// `bitnet bench`: llama-bench's tests (pp N: one N-token prompt; tg N: N single-token decode
// steps from an empty cache) over models x head types x thread counts, with the achieved read
// bandwidth of decoding next to tokens/s, and the machine's own read bandwidth to compare with.
// --parallel adds tg N with several sequences decoded in one batched step each, as `bitnet
// serve`'s slots are (llama-batched-bench's S_TG): the throughput a server gains from batching.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <memory>
#include <random>
#include <thread>

#include <unistd.h>

#include "commands.h"
#include "membw.h"
#include "report.h"

namespace bitnet::cli {

namespace {

using bench::Row;

constexpr int64_t kMaxTestTokens = 16384;
constexpr int64_t kMaxParallel = 64;      // --parallel: sequences per step
constexpr int64_t kParallelKvBlock = 16;  // positions per KV block of the --parallel tests (as serve)

int64_t hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

struct BenchFlags {
  ModelFlags model;                 // --device (threads come from -t, models from -m below)
  std::vector<std::string> models;  // -m, repeatable
  std::string prompts_text = "128";
  std::string gens_text = "64";
  std::string threads_text;         // "" = every hardware thread
  std::string parallel_text = "1";
  std::string depths_text = "0";
  std::vector<int64_t> prompts;     // parsed from the texts by run()
  std::vector<int64_t> gens;
  std::vector<int64_t> parallel;    // only counts above 1: np 1 is the plain tg test
  std::vector<int64_t> depths;      // -d: tokens in the cache before each pp and tg test
  std::vector<std::string> head_types = {""};
  int reps = 3;
  std::string output = "md";
  bool membw_only = false;
};

// Peak resident memory since the last reset_peak_rss(), from /proc (0 where unknown).
uint64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      uint64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

void reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // Linux: reset the peak RSS (VmHWM) to the current RSS
}

// Progress on stderr: one line rewritten in place on a terminal, a line per step otherwise.
void progress(const std::string& line) {
  static const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (tty) {
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
  } else if (!line.empty()) {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Token ids drawn from the model's vocabulary, the same sequence in every test.
class RandomTokens {
 public:
  explicit RandomTokens(const Model& model) : n_vocab_(static_cast<uint32_t>(model.n_vocab())) {}
  int32_t operator()() { return static_cast<int32_t>(rng_() % n_vocab_); }

 private:
  std::mt19937 rng_{42};
  uint32_t n_vocab_;
};

// Called before each counted run and after the last, not around the warm-up: a decode row's
// bandwidth readings (BandwidthProbe), or empty.
using Between = std::function<void()>;

// One warm-up run, not counted (as llama-bench), then `reps` runs: `run(warm_up)` does one and
// returns the seconds it timed. Samples of n_tokens / seconds.
template <class Run>
Result<std::vector<double>> timed_runs(int reps, const std::string& label, double n_tokens, const Between& between,
                                       Run run) {
  std::vector<double> samples;
  for (int r = -1; r < reps; ++r) {
    progress(r < 0 ? label + " warm-up" : fmt::format("{} run {}/{}", label, r + 1, reps));
    if (r >= 0 && between) between();
    BITNET_ASSIGN_OR_RETURN(const double seconds, run(r < 0));
    if (r >= 0) samples.push_back(n_tokens / seconds);
  }
  if (between) between();
  return samples;
}

// One test (pp or tg) repeated, after n_depth tokens of context (evaluated before the clock
// starts, as llama-bench's -d): samples of tokens/s. Returns an error Status on failure.
Result<std::vector<double>> run_test(Engine& engine, int64_t n_depth, int64_t n_prompt, int64_t n_gen, int reps,
                                     const std::string& label, const Between& between) {
  RandomTokens random_token(engine);
  const int32_t first = engine.bos_id().value_or(0);
  return timed_runs(reps, label, static_cast<double>(n_prompt + n_gen), between, [&](bool warm_up) -> Result<double> {
    engine.reset();
    if (n_depth > 0) {
      std::vector<int32_t> context(static_cast<size_t>(n_depth));
      context[0] = first;
      for (size_t i = 1; i < context.size(); ++i) context[i] = random_token();
      BITNET_ASSIGN_OR_RETURN(auto logits, engine.eval(context, false));
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (n_prompt > 0) {
      std::vector<int32_t> tokens(static_cast<size_t>(n_prompt));
      tokens[0] = n_depth > 0 ? random_token() : first;
      for (size_t i = 1; i < tokens.size(); ++i) tokens[i] = random_token();
      BITNET_ASSIGN_OR_RETURN(auto logits, engine.eval(tokens, false));
    } else {
      int32_t token = n_depth > 0 ? random_token() : first;
      for (int64_t i = 0; i < (warm_up ? 1 : n_gen); ++i) {
        BITNET_ASSIGN_OR_RETURN(auto logits, engine.eval(std::span<const int32_t>(&token, 1), false));
        token = random_token();
      }
    }
    return seconds_since(t0);
  });
}

// tg n_gen over n_seq sequences, each step one token of every sequence (Model::step on a paged
// cache), repeated: samples of the summed tokens/s. Each run opens fresh sessions from BOS and
// closes them, so their KV blocks go back to the pool.
Result<std::vector<double>> run_parallel_test(Model& model, int64_t n_seq, int64_t n_gen, int reps,
                                              const std::string& label, const Between& between) {
  RandomTokens random_token(model);
  return timed_runs(reps, label, static_cast<double>(n_seq * n_gen), between, [&](bool warm_up) -> Result<double> {
    std::vector<Session> sessions;
    for (int64_t i = 0; i < n_seq; ++i) {
      BITNET_ASSIGN_OR_RETURN(Session s, model.open_session());
      sessions.push_back(std::move(s));
    }
    std::vector<int32_t> tokens(static_cast<size_t>(n_seq), model.bos_id().value_or(0));
    std::vector<Model::StepInput> batch(static_cast<size_t>(n_seq));
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < (warm_up ? 1 : n_gen); ++i) {
      // Each sequence takes back its largest logit, as a greedy server's would (the tokens fed
      // are random, so every step runs whatever the logits say).
      for (size_t k = 0; k < batch.size(); ++k) batch[k] = {&sessions[k], std::span<const int32_t>(&tokens[k], 1), 1};
      BITNET_ASSIGN_OR_RETURN(auto out, model.step(batch));
      for (int32_t& t : tokens) t = random_token();
    }
    return seconds_since(t0);
  });
}

// The progress label of a row's test.
std::string test_label(const Row& row) {
  return fmt::format("bench: {} {} t={} {}", row.model_name, row.backend, row.n_threads, row.test_name());
}

// The host's read bandwidth on n_threads, measured now over `bytes` (--membw: 1 GiB, five
// passes; between a decode row's runs: 256 MiB, four passes, 0.1 s, which agreed with it on
// Zen 4). The buffer is kept out of the engine's peak RSS: `peak` takes the peak so far, and
// the high-water mark is reset.
double measure_bandwidth(int n_threads, uint64_t& peak, size_t bytes = size_t{1} << 30, int passes = 5) {
  peak = std::max(peak, peak_rss_bytes());
  const double gbps = bench::measure_read_bandwidth(n_threads, bytes, passes);
  reset_peak_rss();
  return gbps;
}

// The host's read bandwidth around each run of a decode row: a reading before every run and
// after the last. Each run's bound is the higher of the two beside it: a shared host's
// bandwidth moves within seconds (between about 25 and 69 GB/s on 2 Zen 4 cores), and one low
// reading would credit the run with more than its share. A GPU's rows take its peak (describe),
// and a run of only GPU rows never measures the host.
class BandwidthProbe {
 public:
  BandwidthProbe(const Row& row, uint64_t& peak)
      : n_threads_(row.n_threads), peak_(peak), active_(row.n_gen > 0 && !row.device_peak) {}
  Between between() {
    if (!active_) return {};
    return [this] { readings_.push_back(measure_bandwidth(n_threads_, peak_, size_t{256} << 20, 4)); };
  }
  void stamp(Row& row) const {
    if (readings_.size() != row.samples_ts.size() + 1) return;
    row.membw_samples.clear();
    for (size_t i = 0; i + 1 < readings_.size(); ++i) row.membw_samples.push_back(std::max(readings_[i], readings_[i + 1]));
    row.membw_gbps = std::accumulate(row.membw_samples.begin(), row.membw_samples.end(), 0.0) /
                     static_cast<double>(row.membw_samples.size());
  }

 private:
  int n_threads_;
  uint64_t& peak_;
  const bool active_;  // a decode row on the host
  std::vector<double> readings_;
};

// Every test of one loaded engine.
Status bench_engine(const BenchFlags& f, Engine& engine, Row base, std::vector<Row>& rows, uint64_t& peak) {
  std::vector<std::pair<int64_t, int64_t>> tests;
  for (int64_t p : f.prompts) tests.emplace_back(p, 0);
  for (int64_t n : f.gens) tests.emplace_back(0, n);
  for (int64_t depth : f.depths) {
    for (const auto& [n_prompt, n_gen] : tests) {
      Row row = base;
      row.n_prompt = n_prompt;
      row.n_gen = n_gen;
      row.n_depth = depth;
      BandwidthProbe probe(row, peak);
      BITNET_ASSIGN_OR_RETURN(row.samples_ts,
                              run_test(engine, depth, n_prompt, n_gen, f.reps, test_label(row), probe.between()));
      probe.stamp(row);
      rows.push_back(std::move(row));
    }
  }
  progress("");
  return {};
}

// The --parallel tests of one model loaded with a paged cache.
Status bench_parallel(const BenchFlags& f, Model& model, Row base, std::vector<Row>& rows, uint64_t& peak) {
  for (int64_t n_seq : f.parallel) {
    for (int64_t n_gen : f.gens) {
      Row row = base;
      row.n_gen = n_gen;
      row.n_parallel = n_seq;
      BandwidthProbe probe(row, peak);
      BITNET_ASSIGN_OR_RETURN(row.samples_ts,
                              run_parallel_test(model, n_seq, n_gen, f.reps, test_label(row), probe.between()));
      probe.stamp(row);
      rows.push_back(std::move(row));
    }
  }
  progress("");
  return {};
}

// Loads an Engine, or a Model with a paged cache, for the rows of one (file, head type, thread
// count): their shared fields and the load time in `base`, the peak RSS counted from here.
template <class M>
Result<std::unique_ptr<M>> load_for_rows(const EngineOptions& options, const std::string& path, const std::string& head,
                                         int n_threads, Row& base) {
  reset_peak_rss();
  const auto t0 = std::chrono::steady_clock::now();
  BITNET_ASSIGN_OR_RETURN(std::unique_ptr<M> m, M::load(options));
  base = bench::describe(*m, path, head);
  base.n_threads = n_threads;
  base.load_seconds = seconds_since(t0);
  return m;
}

// Rows from `first` on get the peak RSS over their model's load and every test of it (weights
// touched by decode included).
void stamp_peak(std::vector<Row>& rows, size_t first, uint64_t peak) {
  peak = std::max(peak, peak_rss_bytes());
  for (size_t i = first; i < rows.size(); ++i) rows[i].peak_rss_bytes = peak;
}

// "128,512" -> {128, 512}, each in [lo, hi]; an error message otherwise.
Result<std::vector<int64_t>> parse_list(const std::string& text, const char* flag, int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (size_t pos = 0; pos <= text.size();) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
      return invalid_argument(fmt::format("{} takes a comma-separated list of integers in [{}, {}], got '{}'", flag, lo, hi, text));
    }
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

int run(BenchFlags f) {
  const std::string all_threads = std::to_string(hardware_threads());
  // 0 in -p or -n: no test of that kind (as llama-bench).
  auto prompts = parse_list(f.prompts_text, "-p", 0, kMaxTestTokens);
  auto gens = parse_list(f.gens_text, "-n", 0, kMaxTestTokens);
  auto threads = parse_list(f.threads_text.empty() ? all_threads : f.threads_text, "-t", 1, 4 * hardware_threads());
  auto parallel = parse_list(f.parallel_text, "--parallel", 1, kMaxParallel);
  auto depths = parse_list(f.depths_text, "-d", 0, kMaxTestTokens);
  for (const auto* r : {&prompts, &gens, &threads, &parallel, &depths}) {
    if (!r->ok()) return fail(r->status());
  }
  f.depths = *depths;
  f.prompts.clear();
  f.gens.clear();
  std::copy_if(prompts->begin(), prompts->end(), std::back_inserter(f.prompts), [](int64_t n) { return n > 0; });
  std::copy_if(gens->begin(), gens->end(), std::back_inserter(f.gens), [](int64_t n) { return n > 0; });
  f.parallel.clear();
  std::copy_if(parallel->begin(), parallel->end(), std::back_inserter(f.parallel), [](int64_t n) { return n > 1; });
  const bool plain_tg = std::find(parallel->begin(), parallel->end(), 1) != parallel->end();
  if (f.prompts.empty() && f.gens.empty() && !f.membw_only) {
    std::fprintf(stderr, "error: nothing to measure: -p and -n are both 0 (see --help)\n");
    return 2;
  }
  if (f.models.empty() && !f.membw_only) {
    std::fprintf(stderr, "error: bench needs a model (-m FILE) unless --membw is given\n");
    return 2;
  }
  if (f.membw_only) {
    for (int64_t t : *threads) {
      uint64_t unused = 0;
      progress(fmt::format("bench: measuring read bandwidth on {} thread(s)", t));
      const double gbps = measure_bandwidth(static_cast<int>(t), unused);
      progress("");
      fmt::print("read bandwidth, {} thread(s): {:.1f} GB/s\n", t, gbps);
    }
    return 0;
  }
  std::vector<Row> rows;
  for (const std::string& path : f.models) {
    for (const std::string& head : f.head_types) {
      for (int64_t t64 : *threads) {
        const int t = static_cast<int>(t64);
        ModelFlags mf = f.model;
        mf.model = path;
        mf.n_threads = t;
        const int64_t max_prompt = f.prompts.empty() ? 0 : *std::max_element(f.prompts.begin(), f.prompts.end());
        const int64_t max_gen = f.gens.empty() ? 0 : *std::max_element(f.gens.begin(), f.gens.end());
        const int64_t max_depth = *std::max_element(f.depths.begin(), f.depths.end());
        mf.n_ctx = max_depth + max_prompt + max_gen + 1;
        auto options = engine_options_from_env(mf);
        if (!options.ok()) return fail(options.status());
        options->head_type = head;
        options->n_batch = std::max<int64_t>(512, max_prompt);  // a prompt in one pass; -d's context in chunks of it
        Row base;
        auto engine = load_for_rows<Engine>(*options, path, head, t, base);
        if (!engine.ok()) return fail(engine.status());
        const size_t first_row = rows.size();
        uint64_t peak = 0;
        BenchFlags plain = f;
        if (!plain_tg) plain.gens.clear();  // --parallel without 1: only the batched decode tests
        const Status s = bench_engine(plain, **engine, base, rows, peak);
        if (!s.ok()) return fail(s.with_context(path));
        stamp_peak(rows, first_row, peak);
        if (f.parallel.empty() || f.gens.empty()) continue;
        // The batched tests need a paged cache: the model is loaded again with one, for every
        // sequence's whole decode. The engine goes first: two copies of the weights would not fit
        // where one barely does.
        engine->reset();  // the unique_ptr: unloads the Engine
        const int64_t max_seq = *std::max_element(f.parallel.begin(), f.parallel.end());
        options->kv_block = kParallelKvBlock;
        options->n_ctx = max_seq * ((max_gen + 1 + kParallelKvBlock - 1) / kParallelKvBlock * kParallelKvBlock);
        auto model = load_for_rows<Model>(*options, path, head, t, base);
        if (!model.ok()) return fail(model.status());
        const size_t first_parallel = rows.size();
        peak = 0;
        const Status ps = bench_parallel(f, **model, base, rows, peak);
        if (!ps.ok()) return fail(ps.with_context(path));
        stamp_peak(rows, first_parallel, peak);
      }
    }
  }
  std::fputs(bench::format_rows(rows, f.output).c_str(), stdout);
  return 0;
}

// The flag's check: the list parses (the same parse runs again when the command runs).
CLI::Validator list_check(const char* flag, int64_t lo, int64_t hi) {
  return CLI::Validator(
      [=](const std::string& text) {
        auto r = parse_list(text, flag, lo, hi);
        return r.ok() ? std::string() : r.status().message();
      },
      "LIST");
}

}  // namespace

void add_bench_command(CLI::App& app, Runner& runner) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "llama-bench-style speed test: prompt (pp) and decode (tg) tokens/s, decode GB/s against the "
               "machine's read bandwidth, load time and peak memory");
  cmd->add_option("-m,--model", f->models, "GGUF model file (repeat -m to measure several in one run)")
      ->take_all();
  cmd->add_option("-p,--n-prompt", f->prompts_text, "prompt lengths, comma-separated; 0 = no prompt test (default: 128)")
      ->check(list_check("-p", 0, kMaxTestTokens));
  cmd->add_option("-n,--n-gen", f->gens_text, "decode lengths, comma-separated; 0 = no decode test (default: 64)")
      ->check(list_check("-n", 0, kMaxTestTokens));
  cmd->add_option("-t,--threads", f->threads_text,
                  fmt::format("thread counts, comma-separated, at most {} (default: {})", 4 * hardware_threads(), hardware_threads()))
      ->check(list_check("-t", 1, 4 * hardware_threads()));
  cmd->add_option("-d,--n-depth", f->depths_text,
                  "tokens already in the KV cache when each pp and tg test starts (evaluated before the clock), "
                  "comma-separated, as llama-bench's -d; the --parallel tests start at 0 (default: 0)")
      ->check(list_check("-d", 0, kMaxTestTokens));
  cmd->add_option("--parallel,--np", f->parallel_text,
                  fmt::format("decode tests with this many sequences stepped together (a server's slots), "
                              "comma-separated, at most {}; t/s is their sum; 1 = the plain tg test (default: 1)",
                              kMaxParallel))
      ->check(list_check("--parallel", 1, kMaxParallel));
  cmd->add_option("-r,--repetitions", f->reps, "runs of each test after one warm-up run (default: 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--head-type", f->head_types, "requantize the output head: f16|q8_0|q6_K (repeatable)");
  cmd->add_option("--cache-type", f->model.cache_type, "KV cache element type: f16|f32 (default: f16)")
      ->check(CLI::IsMember({"f16", "f32"}));
  cmd->add_option("-o,--output", f->output, "md|json|csv (default: md)")->check(CLI::IsMember({"md", "json", "csv"}));
  cmd->add_flag("--membw", f->membw_only, "only measure the machine's read bandwidth");
  cmd->add_option("--device", f->model.device, "auto|cpu|gpu|cuda|hip|opencl|vulkan (default: $BITNET_DEVICE, else auto)");
  cmd->callback([f, &runner] { runner = [f] { return run(*f); }; });
}

}  // namespace bitnet::cli
