// Test helpers: shared-data paths, llama.cpp's vocab test files, the Llama 3 vocabulary from
// its Hugging Face tokenizer.json, and a small synthetic byte-level BPE vocabulary.
#pragma once

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"

namespace bitnet::test {

inline std::string shared_path(const std::string& rel) {
  return std::string(BITNET_SHARED_DIR) + "/" + rel;
}

inline std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// llama.cpp's test-tokenizer-0 format: inputs separated by "\n__ggml_vocab_test__\n" in
// `.inp`, one line of space-separated ids per input in `.out`. Empty when unreadable.
inline std::vector<VocabCase> read_vocab_cases(const std::string& base) {
  const auto inp = read_text(base + ".inp");
  const auto out = read_text(base + ".out");
  if (!inp || !out) return {};
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp->size();) {
    const size_t next = inp->find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp->substr(pos));
      break;
    }
    texts.push_back(inp->substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<VocabCase> cases;
  std::istringstream lines(*out);
  std::string line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    VocabCase c;
    c.text = i < texts.size() ? texts[i] : std::string();
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  if (cases.size() != texts.size()) return {};
  return cases;
}

// Builds VocabData the way llama.cpp's convert_hf_to_gguf.py does for Llama 3: model.vocab and
// model.merges, plus added tokens (special -> control, others -> user-defined).
inline std::optional<VocabData> load_llama3_vocab() {
  const auto json_text = read_text(shared_path("models/llama3-tokenizer/tokenizer.json"));
  if (!json_text) return std::nullopt;
  const auto j = nlohmann::json::parse(*json_text);
  std::map<int32_t, std::pair<std::string, TokenType>> by_id;
  for (const auto& [text, id] : j.at("model").at("vocab").items()) {
    by_id[id.get<int32_t>()] = {text, TokenType::kNormal};
  }
  const auto add_token = [&](int32_t id, const nlohmann::json& t) {
    const bool special = t.value("special", false);
    by_id[id] = {t.at("content").get<std::string>(),
                 special ? TokenType::kControl : TokenType::kUserDefined};
  };
  for (const auto& t : j.at("added_tokens")) add_token(t.at("id").get<int32_t>(), t);
  const auto config_text = read_text(shared_path("models/llama3-tokenizer/tokenizer_config.json"));
  if (config_text) {
    const auto config = nlohmann::json::parse(*config_text);
    if (config.contains("added_tokens_decoder")) {
      for (const auto& [id, t] : config.at("added_tokens_decoder").items()) {
        add_token(std::stoi(id), t);
      }
    }
  }
  VocabData data;
  data.kind = TokenizerKind::kBpe;
  data.pre = "llama-bpe";
  const int32_t n = by_id.rbegin()->first + 1;
  for (int32_t id = 0; id < n; ++id) {
    const auto it = by_id.find(id);
    // convert_hf_to_gguf.py fills holes with unused [PADn] tokens.
    data.tokens.push_back(it == by_id.end() ? "[PAD" + std::to_string(id) + "]" : it->second.first);
    data.token_types.push_back(int32_t(it == by_id.end() ? TokenType::kUnused : it->second.second));
  }
  for (const auto& m : j.at("model").at("merges")) {
    // Newer tokenizer.json files store merges as [left, right] pairs.
    data.merges.push_back(m.is_string()
                              ? m.get<std::string>()
                              : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
  }
  for (int32_t id = 0; id < n; ++id) {
    if (data.tokens[id] == "<|begin_of_text|>") data.bos_id = id;
    if (data.tokens[id] == "<|end_of_text|>") data.eos_id = id;
  }
  return data;
}

// A byte-level BPE vocabulary: the 256 byte characters plus the merges given as raw text
// pairs (written here with GPT-2's mapping, so "h e" or " t").
inline VocabData byte_level_vocab(const std::vector<std::pair<std::string, std::string>>& merges,
                                  std::string pre = "llama-bpe") {
  const auto mapped = [](const std::string& raw) {
    std::string s;
    for (char c : raw) s += tok::byte_to_unicode(static_cast<uint8_t>(c));
    return s;
  };
  VocabData data;
  data.kind = TokenizerKind::kBpe;
  data.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) data.tokens.emplace_back(tok::byte_to_unicode(uint8_t(b)));
  for (const auto& [l, r] : merges) {
    data.merges.push_back(mapped(l) + " " + mapped(r));
    data.tokens.push_back(mapped(l + r));
  }
  data.tokens.push_back("<|begin_of_text|>");
  data.tokens.push_back("<|eot_id|>");
  data.token_types.assign(data.tokens.size(), int32_t(TokenType::kNormal));
  data.token_types[data.tokens.size() - 2] = int32_t(TokenType::kControl);
  data.token_types[data.tokens.size() - 1] = int32_t(TokenType::kControl);
  data.bos_id = int32_t(data.tokens.size() - 2);
  return data;
}

}  // namespace bitnet::test
