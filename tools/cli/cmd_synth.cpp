#include <fmt/format.h>

#include <cstdio>
#include <limits>

#include "bitnet/synth.h"
#include "commands.h"

namespace bitnet::cli {

namespace {

struct SynthFlags {
  SynthOptions options;
  std::string preset = "tiny";
  // Shape overrides (0 = the preset's).
  int64_t n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, head_dim = 0;
  std::string arch;
};

int run(SynthFlags f) {
  auto shape = synth_preset(f.preset);
  if (!shape.ok()) return fail(shape.status());
  SynthShape& s = *shape;
  for (auto [dst, v] : {std::pair{&s.n_vocab, f.n_vocab}, {&s.n_embd, f.n_embd}, {&s.n_layer, f.n_layer},
                        {&s.n_head, f.n_head}, {&s.n_head_kv, f.n_head_kv}, {&s.n_ff, f.n_ff},
                        {&s.n_embd_head, f.head_dim}}) {
    if (v > 0) *dst = v;
  }
  if (!f.arch.empty()) s.architecture = f.arch;
  f.options.shape = s;
  std::fprintf(stderr, "writing %s: %s, %lld layers, n_embd %lld, n_ff %lld, vocab %lld, %s weights...\n",
               f.options.output_path.c_str(), s.architecture.c_str(), static_cast<long long>(s.n_layer),
               static_cast<long long>(s.n_embd), static_cast<long long>(s.n_ff),
               static_cast<long long>(s.n_vocab), f.options.weight_type.c_str());
  const Status st = synthesize_model(f.options);
  if (!st.ok()) return fail(st);
  std::fprintf(stderr, "done\n");
  return 0;
}

}  // namespace

void add_synth_command(CLI::App& app, Runner& runner) {
  auto flags = std::make_shared<SynthFlags>();
  CLI::App* cmd = app.add_subcommand("synth", "write a GGUF with random ternary weights (for tests and benchmarks; float architectures store them as floats)");
  cmd->add_option("-o,--output", flags->options.output_path, "output GGUF file")->required();
  cmd->add_option("--preset", flags->preset, "tiny | small | 2b4t (default: tiny)");
  cmd->add_option("--type", flags->options.weight_type, "i2_s | tq2_0 | tq1_0 | f16 | f32 (default: i2_s)");
  cmd->add_option("--vocab-from", flags->options.vocab_from, "copy the tokenizer from this GGUF");
  add_number(*cmd, "--seed", flags->options.seed, uint64_t{0}, std::numeric_limits<uint64_t>::max(), "random seed (default: 1)");
  cmd->add_option("--arch", flags->arch, "bitnet-b1.58 | bitnet-25 | bitnet | llama | qwen2 | qwen3 (default: bitnet-b1.58; the last three need --type f32 or f16)");
  // Bounds well above every real BitNet shape (2B-4T: vocab 128256, n_embd 2560, n_ff 6912).
  add_number(*cmd, "--n-vocab", flags->n_vocab, int64_t{0}, int64_t{262144}, "override the vocabulary size (synthetic vocabulary); 0 = the preset's");
  add_number(*cmd, "--n-embd", flags->n_embd, int64_t{0}, int64_t{16384}, "override the hidden size; 0 = the preset's");
  add_number(*cmd, "--n-layer", flags->n_layer, int64_t{0}, int64_t{256}, "override the layer count; 0 = the preset's");
  add_number(*cmd, "--n-head", flags->n_head, int64_t{0}, int64_t{256}, "override the head count; 0 = the preset's");
  add_number(*cmd, "--n-head-kv", flags->n_head_kv, int64_t{0}, int64_t{256}, "override the KV head count; 0 = the preset's");
  add_number(*cmd, "--n-ff", flags->n_ff, int64_t{0}, int64_t{65536}, "override the FFN size; 0 = the preset's");
  add_number(*cmd, "--head-dim", flags->head_dim, int64_t{0}, int64_t{1024}, "qwen3: a head size other than n_embd / n_head; 0 = n_embd / n_head");
  cmd->callback([flags, &runner] { runner = [flags] { return run(*flags); }; });
}

}  // namespace bitnet::cli
