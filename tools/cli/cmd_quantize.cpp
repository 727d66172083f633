// bitnet quantize IN.gguf OUT.gguf TYPE [--head-type T] [--embd-type T] [-t N]
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>

#include "commands.h"
#include "model/quantize_model.h"

namespace bitnet::cli {

namespace {

struct QuantizeFlags {
  std::string input, output, type, head_type, embd_type;
  int n_threads = 0;
};

// A bar on one rewritten line on a terminal; elsewhere a line per tenth of the tensors.
void show_progress(size_t i, size_t n, const TensorPlan& p) {
  static const bool tty = ::isatty(STDERR_FILENO) != 0;
  const size_t done = i + 1;
  if (tty) {
    constexpr size_t kWidth = 30;
    const size_t fill = done * kWidth / n;
    std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu %s -> %.*s", std::string(fill, '#').c_str(),
                 std::string(kWidth - fill, ' ').c_str(), done, n, p.name.c_str(),
                 static_cast<int>(ggml_type_name(p.to).size()), ggml_type_name(p.to).data());
    if (done == n) std::fputc('\n', stderr);
  } else if (done == n || done * 10 / n != i * 10 / n) {
    std::fprintf(stderr, "quantize: %zu/%zu tensors (%s)\n", done, n, p.name.c_str());
  }
}

int run(const QuantizeFlags& f) {
  QuantizeOptions o;
  o.input_path = f.input;
  o.output_path = f.output;
  o.n_threads = f.n_threads;
  auto type = parse_quant_type(f.type);
  if (!type.ok()) return fail(type.status());
  o.type = *type;
  for (auto [name, dst] : {std::pair{&f.head_type, &o.head_type}, {&f.embd_type, &o.embd_type}}) {
    if (name->empty()) continue;
    auto t = parse_quant_type(*name);
    if (!t.ok()) return fail(t.status());
    *dst = *t;
  }
  o.progress = show_progress;
  const auto t0 = std::chrono::steady_clock::now();
  auto plans = quantize_model(o);
  if (!plans.ok()) return fail(plans.status());
  std::map<std::string, int> counts;
  for (const TensorPlan& p : *plans) ++counts[std::string(ggml_type_name(p.to))];
  std::string summary;
  for (const auto& [name, n] : counts) summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", n, name);
  std::fprintf(stderr, "wrote %s in %.1f s: %zu tensors (%s)\n", f.output.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), plans->size(),
               summary.c_str());
  // Fallbacks, one line per resulting type (a model has hundreds of same-shaped tensors).
  std::map<std::string, std::pair<int, std::string>> fallbacks;  // type -> count, first tensor
  for (const TensorPlan& p : *plans) {
    if (p.why.find("fallback") == std::string::npos) continue;
    auto& [n, first] = fallbacks[std::string(ggml_type_name(p.to))];
    if (n++ == 0) first = p.name + ": " + p.why;
  }
  for (const auto& [to, fb] : fallbacks) {
    std::fprintf(stderr, "note: %d tensor(s) fell back to %s as in llama-quantize (e.g. %s)\n", fb.first, to.c_str(),
                 fb.second.c_str());
  }
  return 0;
}

}  // namespace

void add_quantize_command(CLI::App& app, Runner& runner) {
  auto flags = std::make_shared<QuantizeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "rewrite a GGUF model with its weights in another type, with llama-quantize's rules for what stays in higher "
      "precision (1-D tensors and norms kept; the head Q6_K, or Q8_0 where its rows are not 256-blocks)");
  cmd->add_option("input", flags->input, "input GGUF file")->required();
  cmd->add_option("output", flags->output, "output GGUF file (written to OUTPUT.part, renamed when complete)")->required();
  cmd->add_option("type", flags->type, "weight type: " + quant_type_names())->required();
  cmd->add_option("--head-type", flags->head_type, "type of the output head (default: Q6_K as llama-quantize)");
  cmd->add_option("--embd-type", flags->embd_type, "type of an untied token embedding (default: the target; Q4_K for TQ1_0/TQ2_0)");
  add_number(*cmd, "-t,--threads", flags->n_threads, 0, kMaxThreads, "threads (default: all)");
  cmd->callback([flags, &runner] { runner = [flags] { return run(*flags); }; });
}

}  // namespace bitnet::cli
