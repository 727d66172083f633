#include <cstdio>

#include "commands.h"

namespace bitnet::cli {

namespace {

struct TokenizeFlags {
  ModelFlags model;
  std::string text;
  bool ids_only = false;
  bool no_bos = false;
};

int run(const TokenizeFlags& f) {
  int code = 0;
  std::unique_ptr<Engine> engine = load_engine(f.model, code);
  if (!engine) return code;
  const bool add_bos = engine->add_bos_default() && !f.no_bos;
  const std::vector<int32_t> ids = engine->tokenize(f.text, add_bos, /*parse_special=*/true);
  if (f.ids_only) {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
    return 0;
  }
  for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, engine->token_to_piece(id).c_str());
  std::printf("%zu tokens\n", ids.size());
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, Runner& runner) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* cmd = app.add_subcommand("tokenize", "show the tokens of a text (special tokens such as <|eot_id|> are recognised)");
  add_model_flags(*cmd, flags->model);
  cmd->add_option("-p,--prompt", flags->text, "text to tokenize")->required();
  cmd->add_flag("--ids", flags->ids_only, "print only the ids, comma-separated");
  cmd->add_flag("--no-bos", flags->no_bos, "do not add BOS even if the vocabulary asks for it");
  cmd->callback([flags, &runner] { runner = [flags] { return run(*flags); }; });
}

}  // namespace bitnet::cli
