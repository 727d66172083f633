// Tokenizer::from_gguf: tokenizer.ggml.* metadata -> VocabData -> Tokenizer.
#include <limits>

#include "gguf/gguf.h"
#include "model/tokenizer/tokenizer.h"

namespace bitnet {
namespace {

std::vector<std::string> to_strings(const std::vector<std::string_view>& views) {
  return {views.begin(), views.end()};
}

Status read_id(const gguf::File& file, std::string_view key, std::optional<int32_t>& id) {
  BITNET_ASSIGN_OR_RETURN(const std::optional<uint64_t> value, file.get_u64(key));
  if (!value) return {};
  if (*value > uint64_t(std::numeric_limits<int32_t>::max())) {
    return corrupt_file(std::string(key) + " = " + std::to_string(*value) + " is not a token id");
  }
  id = int32_t(*value);
  return {};
}

// Scores are float32 in every converter we know of, but llama.cpp also accepts int32.
Status read_scores(const gguf::File& file, std::vector<float>& scores) {
  constexpr std::string_view kKey = "tokenizer.ggml.scores";
  const gguf::Value* value = file.find(kKey);
  if (value && value->type == gguf::ValueType::kArray &&
      value->array_type == gguf::ValueType::kInt32) {
    BITNET_ASSIGN_OR_RETURN(const auto ints, file.get_i32_array(kKey));
    if (ints) scores.assign(ints->begin(), ints->end());
    return {};
  }
  BITNET_ASSIGN_OR_RETURN(auto floats, file.get_f32_array(kKey));
  if (floats) scores = std::move(*floats);
  return {};
}

Result<VocabData> read_vocab_data(const gguf::File& file) {
  VocabData data;
  BITNET_ASSIGN_OR_RETURN(const auto model, file.get_string("tokenizer.ggml.model"));
  if (!model) return not_found("tokenizer.ggml.model is missing");
  if (*model == "llama") {
    data.kind = TokenizerKind::kSpm;
  } else if (*model == "gpt2") {
    data.kind = TokenizerKind::kBpe;
  } else {
    return unsupported("tokenizer model '" + std::string(*model) +
                       "' is not supported (supported: llama, gpt2)");
  }
  BITNET_ASSIGN_OR_RETURN(const auto pre, file.get_string("tokenizer.ggml.pre"));
  if (pre) data.pre = std::string(*pre);

  BITNET_ASSIGN_OR_RETURN(const auto tokens, file.get_string_array("tokenizer.ggml.tokens"));
  if (!tokens) return not_found("tokenizer.ggml.tokens is missing");
  data.tokens = to_strings(*tokens);
  BITNET_RETURN_IF_ERROR(read_scores(file, data.scores));
  BITNET_ASSIGN_OR_RETURN(auto types, file.get_i32_array("tokenizer.ggml.token_type"));
  if (types) data.token_types = std::move(*types);
  if (data.kind == TokenizerKind::kBpe) {
    BITNET_ASSIGN_OR_RETURN(const auto merges, file.get_string_array("tokenizer.ggml.merges"));
    if (!merges) return not_found("tokenizer.ggml.merges is missing (needed by gpt2 tokenizers)");
    data.merges = to_strings(*merges);
  }

  BITNET_RETURN_IF_ERROR(read_id(file, "tokenizer.ggml.bos_token_id", data.bos_id));
  BITNET_RETURN_IF_ERROR(read_id(file, "tokenizer.ggml.eos_token_id", data.eos_id));
  BITNET_RETURN_IF_ERROR(read_id(file, "tokenizer.ggml.eot_token_id", data.eot_id));
  BITNET_RETURN_IF_ERROR(read_id(file, "tokenizer.ggml.unknown_token_id", data.unk_id));
  BITNET_RETURN_IF_ERROR(read_id(file, "tokenizer.ggml.padding_token_id", data.pad_id));
  BITNET_ASSIGN_OR_RETURN(data.add_bos, file.get_bool("tokenizer.ggml.add_bos_token"));
  BITNET_ASSIGN_OR_RETURN(data.add_space_prefix, file.get_bool("tokenizer.ggml.add_space_prefix"));
  return data;
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  auto data = read_vocab_data(file);
  if (!data) return data.status().with_context(file.name());
  auto tokenizer = from_vocab(std::move(data).value());
  if (!tokenizer) {
    // Inconsistent vocabulary data read from a file is the file's fault.
    const Status& s = tokenizer.status();
    const Status as_file = s.code() == StatusCode::kInvalidArgument ? corrupt_file(s.message()) : s;
    return as_file.with_context(file.name());
  }
  return tokenizer;
}

}  // namespace bitnet
