// Synthetic BitNet models: random ternary linears, a random embedding, unit norms.
// Scales keep activations near unit variance: a ternary row of n uniform codes has
// E[w^2] = 2/3, so scale = 1/sqrt(2n/3).
#include "bitnet/synth.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/fp16.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

namespace bitnet {

std::vector<std::string> synth_preset_names() { return {"tiny", "small", "2b4t"}; }

Result<SynthShape> synth_preset(const std::string& name) {
  SynthShape s;
  if (name == "tiny") return s;  // the golden tiny-bitnet sizes
  if (name == "small") {
    s.n_vocab = 32000; s.n_embd = 1024; s.n_layer = 12; s.n_head = 16; s.n_head_kv = 4;
    s.n_ff = 2816; s.n_ctx = 2048;
    return s;
  }
  if (name == "2b4t") {
    // FORMATS.md: microsoft/bitnet-b1.58-2B-4T.
    s.n_vocab = 128256; s.n_embd = 2560; s.n_layer = 30; s.n_head = 20; s.n_head_kv = 5;
    s.n_ff = 6912; s.n_ctx = 4096;
    return s;
  }
  return invalid_argument(fmt::format("unknown preset '{}' (expected tiny, small or 2b4t)", name));
}

namespace {

Result<GgmlType> parse_weight_type(const std::string& name) {
  if (name == "i2_s") return GgmlType::kI2_S;
  if (name == "tq2_0") return GgmlType::kTQ2_0;
  if (name == "tq1_0") return GgmlType::kTQ1_0;
  if (name == "f16") return GgmlType::kF16;
  if (name == "f32") return GgmlType::kF32;
  return invalid_argument(fmt::format("unknown weight type '{}' (expected i2_s, tq2_0, tq1_0, f16 or f32)", name));
}

std::vector<uint8_t> float_bytes(const std::vector<float>& v, GgmlType type) {
  if (type == GgmlType::kF32) {
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = fp32_to_fp16(v[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

class Synth {
 public:
  Synth(GgmlType type, uint64_t seed) : type_(type), rng_(seed) {}

  Status linear(gguf::Writer& w, const std::string& name, int64_t n_in, int64_t n_out) {
    const int64_t n = n_in * n_out;
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    for (int64_t i = 0; i < n;) {
      uint64_t r = rng_();  // 3^40 < 2^64: forty codes per draw
      for (int j = 0; j < 40 && i < n; ++j, ++i) {
        codes[static_cast<size_t>(i)] = static_cast<uint8_t>(r % 3);
        r /= 3;
      }
    }
    // Rounded to fp16 so that every format (TQ stores an fp16 d) holds it exactly.
    const float scale = fp16_to_fp32(fp32_to_fp16(1.0f / std::sqrt(2.0f * static_cast<float>(n_in) / 3.0f)));
    if (quant::is_ternary(type_)) {
      const int64_t block = quant::ternary_scale_block(type_, n);
      const std::vector<float> scales(static_cast<size_t>(n / block), scale);
      BITNET_ASSIGN_OR_RETURN(auto bytes, quant::ternary_encode(type_, codes.data(), scales.data(), n));
      return w.add_tensor(name, type_, {n_in, n_out}, std::move(bytes));
    }
    std::vector<float> values(static_cast<size_t>(n));
    for (size_t i = 0; i < values.size(); ++i) values[i] = (static_cast<float>(codes[i]) - 1.0f) * scale;
    return w.add_tensor(name, type_, {n_in, n_out}, float_bytes(values, type_));
  }

  Status norm(gguf::Writer& w, const std::string& name, int64_t n) {
    return w.add_tensor(name, GgmlType::kF32, {n}, float_bytes(std::vector<float>(static_cast<size_t>(n), 1.0f), GgmlType::kF32));
  }

  // An F32 vector of mean + sd * N(0, 1) values (biases, norm gains that are not all 1).
  Status random_vector(gguf::Writer& w, const std::string& name, int64_t n, float mean, float sd) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = mean + sd * normal(rng_);
    return w.add_tensor(name, GgmlType::kF32, {n}, float_bytes(values, GgmlType::kF32));
  }

  Status embedding(gguf::Writer& w, int64_t n_embd, int64_t n_vocab) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(static_cast<size_t>(n_embd * n_vocab));
    for (float& v : values) v = normal(rng_);
    // As the official I2_S file: an F16 embedding (F32 when everything else is F32).
    const GgmlType t = type_ == GgmlType::kF32 ? GgmlType::kF32 : GgmlType::kF16;
    return w.add_tensor("token_embd.weight", t, {n_embd, n_vocab}, float_bytes(values, t));
  }

 private:
  GgmlType type_;
  std::mt19937_64 rng_;
};

// A SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte tokens, printable ASCII
// pieces, then filler pieces up to n_vocab.
Status synthetic_vocab(gguf::Writer& w, int64_t n_vocab) {
  if (n_vocab < 400) return invalid_argument("a synthetic vocabulary needs at least 400 tokens");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(6);
  }
  for (char c = 33; c < 127; ++c) {
    tokens.emplace_back(1, c);
    tokens.push_back("\xe2\x96\x81" + std::string(1, c));  // "▁c"
    types.insert(types.end(), {1, 1});
  }
  tokens.push_back("\xe2\x96\x81");
  types.push_back(1);
  for (int64_t i = static_cast<int64_t>(tokens.size()); i < n_vocab; ++i) {
    tokens.push_back(fmt::format("\xe2\x96\x81tok{}", i));
    types.push_back(1);
  }
  tokens.resize(static_cast<size_t>(n_vocab));
  types.resize(static_cast<size_t>(n_vocab));
  std::vector<float> scores(tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", std::move(tokens));
  w.set_f32_array("tokenizer.ggml.scores", std::move(scores));
  w.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  return {};
}

// Copies tokenizer.* metadata from another GGUF; returns its vocabulary size.
Result<int64_t> copy_vocab(gguf::Writer& w, const std::string& path) {
  BITNET_ASSIGN_OR_RETURN(gguf::File src, gguf::File::open(path));
  int64_t n_vocab = 0;
  for (const gguf::KeyValue& kv : src.metadata()) {
    if (kv.key.rfind("tokenizer.", 0) != 0) continue;
    const gguf::Value& v = kv.value;
    switch (v.type) {
      case gguf::ValueType::kString: w.set_string(kv.key, std::string(v.str)); break;
      case gguf::ValueType::kBool: w.set_bool(kv.key, v.u64 != 0); break;
      case gguf::ValueType::kUint8:
      case gguf::ValueType::kUint16:
      case gguf::ValueType::kUint32: w.set_u32(kv.key, static_cast<uint32_t>(v.u64)); break;
      case gguf::ValueType::kInt32: w.set_i32(kv.key, static_cast<int32_t>(v.i64)); break;
      case gguf::ValueType::kArray:
        if (v.array_type == gguf::ValueType::kString) {
          BITNET_ASSIGN_OR_RETURN(auto strs, src.get_string_array(kv.key));
          if (!strs) return internal_error("listed key " + kv.key + " not found");
          std::vector<std::string> copy(strs->begin(), strs->end());
          if (kv.key == "tokenizer.ggml.tokens") n_vocab = static_cast<int64_t>(copy.size());
          w.set_string_array(kv.key, std::move(copy));
        } else if (v.array_type == gguf::ValueType::kFloat32) {
          BITNET_ASSIGN_OR_RETURN(auto f, src.get_f32_array(kv.key));
          if (!f) return internal_error("listed key " + kv.key + " not found");
          w.set_f32_array(kv.key, std::move(*f));
        } else {
          BITNET_ASSIGN_OR_RETURN(auto ints, src.get_i32_array(kv.key));
          if (!ints) return internal_error("listed key " + kv.key + " not found");
          w.set_i32_array(kv.key, std::move(*ints));
        }
        break;
      default:
        return unsupported(fmt::format("{}: cannot copy metadata {} of type {}", path, kv.key,
                                       gguf::value_type_name(v.type)));
    }
  }
  if (n_vocab == 0) return not_found(fmt::format("{} has no tokenizer.ggml.tokens", path));
  return n_vocab;
}

}  // namespace

Status synthesize_model(const SynthOptions& o) {
  BITNET_ASSIGN_OR_RETURN(GgmlType type, parse_weight_type(o.weight_type));
  SynthShape s = o.shape;
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_ff <= 0 || s.n_embd_head < 0 ||
      (s.n_embd_head == 0 && s.n_embd % s.n_head != 0) || s.n_head % s.n_head_kv != 0) {
    return invalid_argument("inconsistent shape: need n_embd % n_head == 0 (or a head size) and n_head % n_head_kv == 0");
  }
  const std::string& a = s.architecture;
  const bool bitnet = a == "bitnet-b1.58" || a == "bitnet-25" || a == "bitnet";
  if (!bitnet && a != "llama" && a != "qwen2" && a != "qwen3") {
    return invalid_argument(fmt::format("synth writes bitnet-b1.58, bitnet-25, bitnet, llama, qwen2 or qwen3 models, not '{}'", a));
  }
  if (!bitnet && quant::is_ternary(type)) {
    return invalid_argument(fmt::format("{} has float linears: use --weights f32 or f16", a));
  }
  if (s.n_embd_head != 0 && a != "qwen3") return invalid_argument("a head size apart from n_embd / n_head is for qwen3");
  const int64_t head = s.n_embd_head != 0 ? s.n_embd_head : s.n_embd / s.n_head;
  const int64_t n_q = head * s.n_head, n_kv = head * s.n_head_kv;
  if (quant::is_ternary(type) && (s.n_embd % 256 != 0 || s.n_ff % 256 != 0)) {
    return invalid_argument(fmt::format("{} needs n_embd and n_ff to be multiples of 256", o.weight_type));
  }
  gguf::Writer w;
  w.set_string("general.architecture", a);
  w.set_string("general.name", fmt::format("synthetic-{}-{}", a, o.weight_type));
  if (!o.vocab_from.empty()) {
    BITNET_ASSIGN_OR_RETURN(s.n_vocab, copy_vocab(w, o.vocab_from));
  } else {
    BITNET_RETURN_IF_ERROR(synthetic_vocab(w, s.n_vocab));
  }
  w.set_u32(a + ".vocab_size", static_cast<uint32_t>(s.n_vocab));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(head));
  if (s.n_embd_head != 0) {
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(head));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(head));
  }
  w.set_f32(a + ".rope.freq_base", s.rope_freq_base);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);

  Synth g(type, o.seed);
  BITNET_RETURN_IF_ERROR(g.embedding(w, s.n_embd, s.n_vocab));
  BITNET_RETURN_IF_ERROR(g.norm(w, "output_norm.weight", s.n_embd));
  for (int64_t il = 0; il < s.n_layer; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    BITNET_RETURN_IF_ERROR(g.norm(w, p + "attn_norm.weight", s.n_embd));
    BITNET_RETURN_IF_ERROR(g.linear(w, p + "attn_q.weight", s.n_embd, n_q));
    BITNET_RETURN_IF_ERROR(g.linear(w, p + "attn_k.weight", s.n_embd, n_kv));
    BITNET_RETURN_IF_ERROR(g.linear(w, p + "attn_v.weight", s.n_embd, n_kv));
    if (a == "qwen2") {
      BITNET_RETURN_IF_ERROR(g.random_vector(w, p + "attn_q.bias", n_q, 0.0f, 0.5f));
      BITNET_RETURN_IF_ERROR(g.random_vector(w, p + "attn_k.bias", n_kv, 0.0f, 0.5f));
      BITNET_RETURN_IF_ERROR(g.random_vector(w, p + "attn_v.bias", n_kv, 0.0f, 0.5f));
    }
    if (a == "qwen3") {
      BITNET_RETURN_IF_ERROR(g.random_vector(w, p + "attn_q_norm.weight", head, 1.0f, 0.25f));
      BITNET_RETURN_IF_ERROR(g.random_vector(w, p + "attn_k_norm.weight", head, 1.0f, 0.25f));
    }
    if (bitnet) BITNET_RETURN_IF_ERROR(g.norm(w, p + "attn_sub_norm.weight", n_q));
    BITNET_RETURN_IF_ERROR(g.linear(w, p + "attn_output.weight", n_q, s.n_embd));
    BITNET_RETURN_IF_ERROR(g.norm(w, p + "ffn_norm.weight", s.n_embd));
    BITNET_RETURN_IF_ERROR(g.linear(w, p + "ffn_gate.weight", s.n_embd, s.n_ff));
    BITNET_RETURN_IF_ERROR(g.linear(w, p + "ffn_up.weight", s.n_embd, s.n_ff));
    if (bitnet) BITNET_RETURN_IF_ERROR(g.norm(w, p + "ffn_sub_norm.weight", s.n_ff));
    BITNET_RETURN_IF_ERROR(g.linear(w, p + "ffn_down.weight", s.n_ff, s.n_embd));
  }
  return w.write(o.output_path);
}

}  // namespace bitnet
