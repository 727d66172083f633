#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "commands.h"

namespace bitnet::cli {

namespace {

struct PerplexityFlags {
  ModelFlags model;
  std::string file;
  int64_t n_ctx = 512;
};

int run(PerplexityFlags f) {
  // The text is read whole: /dev/zero would never end and a FIFO could block forever.
  std::error_code ec;
  if (std::filesystem::exists(f.file, ec) && !std::filesystem::is_regular_file(f.file, ec)) {
    return fail(io_error(fmt::format("{}: is not a regular file", f.file)));
  }
  std::ifstream in(f.file, std::ios::binary);
  if (!in) return fail(io_error(fmt::format("{}: cannot open", f.file)));
  std::stringstream text;
  text << in.rdbuf();
  if (f.model.n_ctx < f.n_ctx) f.model.n_ctx = f.n_ctx;  // the engine's context must hold a chunk
  int code = 0;
  std::unique_ptr<Engine> engine = load_engine(f.model, code);
  if (!engine) return code;
  auto r = perplexity(*engine, text.str(), f.n_ctx, [](int64_t chunk, double ppl) {
    std::fprintf(stderr, "[%lld]%.4f ", static_cast<long long>(chunk + 1), ppl);
  });
  std::fputc('\n', stderr);
  if (!r.ok()) return fail(r.status());
  fmt::print("PPL = {:.4f} ({} chunks of {} tokens, {} tokens scored)\n", r->ppl, r->n_chunks, f.n_ctx, r->n_scored);
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app, Runner& runner) {
  auto flags = std::make_shared<PerplexityFlags>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "perplexity of a text file as llama-perplexity computes it (non-overlapping chunks, second half scored)");
  cmd->add_option("-m,--model", flags->model.model, "GGUF model file")->required();
  cmd->add_option("-f,--file", flags->file, "text file")->required();
  add_number(*cmd, "-c,--ctx-size", flags->n_ctx, int64_t{8}, kMaxTokens, "chunk length in tokens (default: 512)");
  add_device_flags(*cmd, flags->model);
  cmd->callback([flags, &runner] { runner = [flags] { return run(*flags); }; });
}

}  // namespace bitnet::cli
