#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <limits>

#include "commands.h"

namespace bitnet::cli {

namespace {

struct LogitsFlags {
  ModelFlags model;
  std::string text;
  std::vector<int32_t> ids;
  std::string output;
};

int run(const LogitsFlags& f) {
  int code = 0;
  std::unique_ptr<Engine> engine = load_engine(f.model, code);
  if (!engine) return code;
  // --ids are run exactly as given; text gets BOS when the vocabulary asks for it.
  const std::vector<int32_t> ids = f.ids.empty() ? engine->tokenize(f.text, engine->add_bos_default(), true) : f.ids;
  if (ids.empty()) return fail(invalid_argument("no tokens to evaluate"));
  auto logits = engine->eval(ids, /*all_logits=*/true);
  if (!logits.ok()) return fail(logits.status());
  std::ofstream out(f.output, std::ios::binary);
  out.write(reinterpret_cast<const char*>(logits->data()), static_cast<std::streamsize>(logits->size() * sizeof(float)));
  out.close();
  if (!out) return fail(io_error(fmt::format("{}: cannot write", f.output)));
  std::string id_list;
  for (size_t i = 0; i < ids.size(); ++i) id_list += (i ? "," : "") + std::to_string(ids[i]);
  fmt::print("n_vocab={} n_tokens={} ids={}\n", engine->n_vocab(), ids.size(), id_list);
  return 0;
}

}  // namespace

void add_logits_command(CLI::App& app, Runner& runner) {
  auto flags = std::make_shared<LogitsFlags>();
  CLI::App* cmd = app.add_subcommand(
      "logits", "write float32 logits [n_tokens][n_vocab] of every position (the ../shared/golden format)");
  add_model_flags(*cmd, flags->model);
  auto* text = cmd->add_option("-p,--prompt", flags->text, "text (tokenized with BOS when the model asks for it)");
  auto* ids = add_number_list(*cmd, "--ids", flags->ids, 0, std::numeric_limits<int32_t>::max(),
                              "token ids, comma-separated, run exactly as given (no BOS added)");
  text->excludes(ids);
  cmd->add_option("-o,--output", flags->output, "output file")->required();
  cmd->callback([flags, text, ids, &runner] {
    if (text->count() == 0 && ids->count() == 0) throw CLI::ValidationError("logits", "give -p TEXT or --ids 1,2,3");
    runner = [flags] { return run(*flags); };
  });
}

}  // namespace bitnet::cli
