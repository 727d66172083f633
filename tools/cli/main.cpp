#include <cstdio>

#include "commands.h"

namespace bitnet::cli {

void add_model_flags(CLI::App& cmd, ModelFlags& flags) {
  cmd.add_option("-m,--model", flags.model, "GGUF model file")->required();
  cmd.add_option("-t,--threads", flags.n_threads, "CPU threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("-c,--ctx-size", flags.n_ctx, "context length (default: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--device", flags.device, "auto|cpu|gpu|cuda|hip|opencl|vulkan (default: auto)");
}

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

std::unique_ptr<Engine> load_engine(const ModelFlags& flags) {
  EngineOptions options;
  options.model_path = flags.model;
  options.device = flags.device;
  options.n_threads = flags.n_threads;
  options.n_ctx = flags.n_ctx;
  auto engine = Engine::load(options);
  if (!engine.ok()) {
    fail(engine.status());
    return nullptr;
  }
  std::fprintf(stderr, "%s threads=%d n_ctx=%lld\n", (*engine)->device_summary().c_str(),
               (*engine)->n_threads(), static_cast<long long>((*engine)->n_ctx()));
  return std::move(engine).value();
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
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fprintf(stderr, "run '%s --help' for usage\n", argv[0]);
    return 2;
  }
  return runner ? runner() : 2;
}
