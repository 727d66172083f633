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
};

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
  int64_t n_embd_head = 0;    // n_embd / n_head
  int64_t n_ff = 0;
  int32_t n_rot = 0;          // <arch>.rope.dimension_count (default n_embd_head)
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  FfnAct ffn_act = FfnAct::kSilu;
  hal::RopeStyle rope_style = hal::RopeStyle::kNorm;

  int64_t n_embd_kv() const { return n_head_kv * n_embd_head; }
  bool is_bitnet() const { return arch != Arch::kLlama; }

  // Reads and validates the hyper-parameters; n_vocab comes from the token embedding.
  static Result<ModelConfig> from_gguf(const gguf::File& file);
};

std::string_view ffn_act_name(FfnAct act);

}  // namespace bitnet
