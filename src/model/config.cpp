#include "model/config.h"

#include <fmt/format.h>

#include "gguf/gguf.h"

namespace bitnet {

std::string_view ffn_act_name(FfnAct act) { return act == FfnAct::kSilu ? "silu" : "relu2"; }

std::string_view supported_arch_names() { return "llama, bitnet, bitnet-b1.58, bitnet-25, qwen2, qwen3"; }

namespace {

Result<Arch> parse_arch(std::string_view name) {
  // llama.cpp's "mistral" and "smollm" files carry general.architecture = "llama".
  if (name == "llama") return Arch::kLlama;
  if (name == "bitnet") return Arch::kBitnet;
  if (name == "bitnet-b1.58") return Arch::kBitnetB158;
  if (name == "bitnet-25") return Arch::kBitnet25;
  if (name == "qwen2") return Arch::kQwen2;
  if (name == "qwen3") return Arch::kQwen3;
  return unsupported(fmt::format("unknown architecture '{}' (supported: {})", name, supported_arch_names()));
}

// The FFN activation: named by <arch>.hidden_act when present, else the architecture's own.
// Upstream llama.cpp silently defaults every "bitnet" file to SiLU; here the default is a
// property of the architecture string, and an unknown name is an error.
Result<FfnAct> pick_ffn_act(Arch arch, std::optional<std::string_view> hidden_act) {
  if (hidden_act) {
    const std::string_view a = *hidden_act;
    if (a == "silu" || a == "swish" || a == "swiglu") return FfnAct::kSilu;
    if (a == "relu2" || a == "relu_squared" || a == "squared_relu") return FfnAct::kRelu2;
    return unsupported(fmt::format("unknown hidden_act '{}' (supported: silu, relu2)", a));
  }
  switch (arch) {
    case Arch::kLlama:
    case Arch::kQwen2:
    case Arch::kQwen3:
    case Arch::kBitnet: return FfnAct::kSilu;
    case Arch::kBitnetB158:
    case Arch::kBitnet25: return FfnAct::kRelu2;
  }
  return FfnAct::kSilu;
}

// Required positive integer <arch>.<key>.
Result<int64_t> get_count(const gguf::File& f, const std::string& key, bool required,
                          int64_t fallback) {
  BITNET_ASSIGN_OR_RETURN(auto v, f.get_u64(key));
  if (!v) {
    if (required) return not_found(fmt::format("missing metadata key {}", key));
    return fallback;
  }
  if (*v == 0 || *v > (uint64_t{1} << 31)) {
    return corrupt_file(fmt::format("metadata {} = {} is out of range", key, *v));
  }
  return static_cast<int64_t>(*v);
}

Result<float> get_float(const gguf::File& f, const std::string& key, float fallback) {
  BITNET_ASSIGN_OR_RETURN(auto v, f.get_f64(key));
  if (!v) return fallback;
  if (!(*v > 0.0) || *v > 1e12) return corrupt_file(fmt::format("metadata {} = {} is out of range", key, *v));
  return static_cast<float>(*v);
}

}  // namespace

Result<ModelConfig> ModelConfig::from_gguf(const gguf::File& f) {
  ModelConfig c;
  BITNET_ASSIGN_OR_RETURN(auto arch_name, f.get_string("general.architecture"));
  if (!arch_name) return not_found("missing metadata key general.architecture");
  c.arch_name = std::string(*arch_name);
  BITNET_ASSIGN_OR_RETURN(c.arch, parse_arch(c.arch_name));
  BITNET_ASSIGN_OR_RETURN(auto name, f.get_string("general.name"));
  if (name) c.name = std::string(*name);

  const std::string p = c.arch_name + ".";
  BITNET_ASSIGN_OR_RETURN(c.n_embd, get_count(f, p + "embedding_length", true, 0));
  BITNET_ASSIGN_OR_RETURN(c.n_layer, get_count(f, p + "block_count", true, 0));
  BITNET_ASSIGN_OR_RETURN(c.n_head, get_count(f, p + "attention.head_count", true, 0));
  BITNET_ASSIGN_OR_RETURN(c.n_head_kv, get_count(f, p + "attention.head_count_kv", false, c.n_head));
  BITNET_ASSIGN_OR_RETURN(c.n_ff, get_count(f, p + "feed_forward_length", true, 0));
  BITNET_ASSIGN_OR_RETURN(c.n_ctx_train, get_count(f, p + "context_length", false, 2048));
  if (c.n_head % c.n_head_kv != 0) {
    return corrupt_file(fmt::format("head_count {} is not a multiple of head_count_kv {}",
                                    c.n_head, c.n_head_kv));
  }
  // The head size: key_length when given (qwen3: 128 with 1024-wide embeddings and 16 heads),
  // else n_embd / n_head. Keys and values of different sizes are not supported.
  BITNET_ASSIGN_OR_RETURN(auto key_length, f.get_u64(p + "attention.key_length"));
  BITNET_ASSIGN_OR_RETURN(auto value_length, f.get_u64(p + "attention.value_length"));
  if (key_length) {
    BITNET_ASSIGN_OR_RETURN(c.n_embd_head, get_count(f, p + "attention.key_length", true, 0));
    if (c.n_embd_head > 65536) return corrupt_file(fmt::format("attention.key_length {} is out of range", c.n_embd_head));
  } else {
    if (c.n_embd % c.n_head != 0) {
      return corrupt_file(fmt::format("embedding_length {} is not a multiple of head_count {}",
                                      c.n_embd, c.n_head));
    }
    c.n_embd_head = c.n_embd / c.n_head;
  }
  if (value_length && *value_length != static_cast<uint64_t>(c.n_embd_head)) {
    return unsupported(fmt::format("attention.value_length {} differs from the key length {}",
                                   *value_length, c.n_embd_head));
  }
  BITNET_ASSIGN_OR_RETURN(int64_t n_rot, get_count(f, p + "rope.dimension_count", false, c.n_embd_head));
  if (n_rot > c.n_embd_head || n_rot % 2 != 0) {
    return corrupt_file(fmt::format("rope.dimension_count {} must be even and <= head size {}",
                                    n_rot, c.n_embd_head));
  }
  c.n_rot = static_cast<int32_t>(n_rot);
  BITNET_ASSIGN_OR_RETURN(c.rms_eps, get_float(f, p + "attention.layer_norm_rms_epsilon", 1e-5f));
  BITNET_ASSIGN_OR_RETURN(c.rope_freq_base, get_float(f, p + "rope.freq_base", 10000.0f));
  BITNET_ASSIGN_OR_RETURN(c.rope_freq_scale, get_float(f, p + "rope.scale_linear", 1.0f));
  c.rope_freq_scale = 1.0f / c.rope_freq_scale;  // scale_linear is the factor, freq_scale its inverse

  BITNET_ASSIGN_OR_RETURN(auto hidden_act, f.get_string(p + "hidden_act"));
  BITNET_ASSIGN_OR_RETURN(c.ffn_act, pick_ffn_act(c.arch, hidden_act));
  // llama.cpp: LLM_ARCH_LLAMA ropes adjacent pairs; bitnet and qwen architectures rotate halves.
  c.rope_style = c.arch == Arch::kLlama ? hal::RopeStyle::kNorm : hal::RopeStyle::kNeox;

  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr) return not_found("missing tensor token_embd.weight");
  c.n_vocab = embd->ne[1];
  return c;
}

}  // namespace bitnet
