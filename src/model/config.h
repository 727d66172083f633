// Hyper-parameters of a model, read from GGUF metadata (<arch>.* keys).
#pragma once

#include <cstdint>
#include <string>

#include "bitnet/status.h"
#include "hal/ops.h"

namespace bitnet {
namespace gguf { class File; }

enum class Arch {
  kLlama,       // "llama" (stories260K, Llama 2 style)
  kBitnet,      // "bitnet" (upstream llama.cpp; 1bitLLM models: SiLU)
  kBitnetB158,  // "bitnet-b1.58" (microsoft/bitnet-b1.58-2B-4T: squared ReLU)
  kBitnet25,    // "bitnet-25" (the early 2B-4T file: squared ReLU)
  kQwen2,       // "qwen2" (Qwen2, Qwen2.5: llama's layer with Q/K/V biases, NEOX rope)
  kQwen3,       // "qwen3" (llama's layer with per-head q/k RMS norms, NEOX rope)
};

// The architecture names this engine runs, for messages ("llama, qwen2, ...").
std::string_view supported_arch_names();

enum class FfnAct { kSilu, kRelu2 };

struct ModelConfig {
  Arch arch = Arch::kLlama;
  std::string arch_name;      // general.architecture
  std::string name;           // general.name (may be empty)
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;    // <arch>.context_length
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_embd_head = 0;    // <arch>.attention.key_length, else n_embd / n_head
  int64_t n_ff = 0;
  int32_t n_rot = 0;          // <arch>.rope.dimension_count (default n_embd_head)
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  FfnAct ffn_act = FfnAct::kSilu;
  hal::RopeStyle rope_style = hal::RopeStyle::kNorm;

  int64_t n_embd_q() const { return n_head * n_embd_head; }  // query and attention-output width
  int64_t n_embd_kv() const { return n_head_kv * n_embd_head; }
  bool is_bitnet() const {
    return arch == Arch::kBitnet || arch == Arch::kBitnetB158 || arch == Arch::kBitnet25;
  }

  // Reads and validates the hyper-parameters; n_vocab comes from the token embedding.
  static Result<ModelConfig> from_gguf(const gguf::File& file);
};

std::string_view ffn_act_name(FfnAct act);

}  // namespace bitnet
