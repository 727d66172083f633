#include <fmt/format.h>

#include <cstdio>

#include "bitnet/model_file.h"
#include "commands.h"

namespace bitnet::cli {

namespace {

struct InspectFlags {
  std::string path;
  bool no_tensors = false;
};

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? " x " : "") + std::to_string(shape[i]);
  return s;
}

int run(const InspectFlags& f) {
  auto info = read_model_file_info(f.path);
  if (!info.ok()) return fail(info.status());
  const ModelFileInfo& m = *info;
  fmt::print("file: {} (GGUF v{}, {} bytes, alignment {})\n", m.path, m.version, m.file_bytes, m.alignment);
  if (m.summary) {
    const ModelSummary& s = *m.summary;
    fmt::print("model: {} | arch {} | {} layers, n_embd {}, {} heads ({} kv), n_ff {}, vocab {}, "
               "ctx {} | ffn {} | rope {} | head {}\n",
               s.name.empty() ? "(unnamed)" : s.name, s.architecture, s.n_layer, s.n_embd, s.n_head,
               s.n_head_kv, s.n_ff, s.n_vocab, s.n_ctx_train, s.ffn_act, s.rope,
               s.tied_head ? "tied" : "separate");
    fmt::print("weights: {:.2f} M parameters, {:.2f} MiB | types {}\n", static_cast<double>(s.n_params) / 1e6,
               static_cast<double>(s.weight_bytes) / (1 << 20), s.weight_types);
  } else {
    fmt::print("model: not runnable by this engine: {}\n", m.summary_error);
  }
  fmt::print("\nmetadata ({} keys):\n", m.metadata.size());
  for (const MetadataEntry& e : m.metadata) fmt::print("  {:<44} {:<14} {}\n", e.key, e.type, e.value);
  if (!f.no_tensors) {
    fmt::print("\ntensors ({}):\n", m.tensors.size());
    for (const TensorEntry& t : m.tensors) {
      fmt::print("  {:<36} {:<6} {:<18} {:>12} bytes @ {}\n", t.name, t.type, shape_str(t.shape),
                 t.n_bytes, t.offset);
    }
  }
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, Runner& runner) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* cmd = app.add_subcommand("inspect", "show a GGUF file's metadata, architecture and tensor table");
  cmd->add_option("model", flags->path, "GGUF file")->required();
  cmd->add_flag("--no-tensors", flags->no_tensors, "omit the tensor table");
  cmd->callback([flags, &runner] { runner = [flags] { return run(*flags); }; });
}

}  // namespace bitnet::cli
