// The `bitnet` command line: each subcommand registers its flags and a runner. Tools are
// thin: flags -> library calls -> output. Errors are one line on stderr and exit code 1.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

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

// Flags every model-loading command shares (-m, -t, -c, --device).
struct ModelFlags {
  std::string model;
  int n_threads = 0;
  int64_t n_ctx = 0;
  std::string device = "auto";
};
void add_model_flags(CLI::App& cmd, ModelFlags& flags);

// Loads the engine and prints the device line to stderr; prints the error and returns null
// on failure.
std::unique_ptr<Engine> load_engine(const ModelFlags& flags);

// Prints "error: <message>" to stderr and returns 1.
int fail(const Status& status);

}  // namespace bitnet::cli
