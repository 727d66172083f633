// VocabData -> Vocab: validation, token attributes, special-token and EOG sets, and the
// token_to_piece cache, following llama.cpp's llama_vocab::impl::load.
#include "model/tokenizer/vocab.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "model/tokenizer/unicode.h"

namespace bitnet::tok {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SPM's space

uint8_t attr_from_type(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kNormal: return kAttrNormal;
    case TokenType::kUnknown: return kAttrUnknown;
    case TokenType::kControl: return kAttrControl;
    case TokenType::kUserDefined: return kAttrUserDefined;
    case TokenType::kUnused: return kAttrUnused;
    case TokenType::kByte: return kAttrByte;
    default: return 0;  // undefined: never matched as special, decodes to nothing
  }
}

// Tokens that end generation, by text, and those llama.cpp also treats as EOG (FIM pad/repo/
// file-separator tokens); from llama_vocab::impl::load (see llama.cpp issue 9606).
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[",
    // FIM pad, repo and file-separator tokens
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>",
    "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"};

bool is_eog_text(std::string_view text) {
  return std::find(std::begin(kEogTexts), std::end(kEogTexts), text) != std::end(kEogTexts);
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i, from.size()) == from) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xNN>" -> NN, or -1.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]);
  const int lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Byte-level BPE text -> bytes (llama.cpp's llama_decode_text, including its marker for
// characters outside the 256-character alphabet).
std::string decode_byte_level(std::string_view text) {
  std::string out;
  for (uint32_t cpt : decode_utf8(text)) {
    const int b = unicode_to_byte(cpt);
    if (b >= 0) {
      out += char(b);
      continue;
    }
    std::string utf8;
    append_utf8(utf8, cpt);
    out += "[UNK_BYTE_0x";
    static constexpr char kHex[] = "0123456789abcdef";
    for (char c : utf8) {
      out += kHex[uint8_t(c) >> 4];
      out += kHex[uint8_t(c) & 15];
    }
    out += text;
    out += ']';
  }
  return out;
}

Status check_id(const std::optional<int32_t>& id, std::string_view name, int32_t n_tokens) {
  if (id && (*id < 0 || *id >= n_tokens)) {
    return invalid_argument(std::string(name) + " " + std::to_string(*id) +
                            " is outside the vocabulary of " + std::to_string(n_tokens));
  }
  return {};
}

Status index_merges(const std::vector<std::string>& merges, Vocab& v) {
  if (merges.size() > size_t(std::numeric_limits<int32_t>::max())) {
    return invalid_argument("too many merges");
  }
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    // As llama.cpp: split at the first space after the first byte, so a merge may start
    // with a space character of its own.
    const size_t space = m.find(' ', 1);
    const auto fail = [&](std::string_view why) {
      return invalid_argument("merge " + std::to_string(i) + " '" + m + "' " + std::string(why));
    };
    if (space == std::string::npos || space + 1 >= m.size()) return fail("is not 'left right'");
    const std::string_view left = std::string_view(m).substr(0, space);
    const std::string_view right = std::string_view(m).substr(space + 1);
    const int32_t left_id = v.find(left);
    const int32_t right_id = v.find(right);
    const int32_t result = v.find(std::string(left) + std::string(right));
    // HF's BPE model rejects such merges too (MergeTokenOutOfVocabulary).
    if (left_id < 0 || right_id < 0 || result < 0) {
      return fail("names a token not in the vocabulary");
    }
    const uint64_t key = (uint64_t(uint32_t(left_id)) << 32) | uint32_t(right_id);
    v.merges.try_emplace(key, Merge{int32_t(i), result});  // the first listing wins
  }
  return {};
}

// llama.cpp's special-token heuristics: EOG by text, control-typed when they look control.
void mark_special(Vocab& v) {
  const int32_t n = v.n_tokens();
  v.eog.assign(n, 0);
  for (int32_t id = 0; id < n; ++id) {
    uint8_t& attr = v.attrs[id];
    if (is_eog_text(v.texts[id])) {
      v.eog[id] = 1;
      attr |= kAttrControl;
    }
    if ((attr & kAttrControl) && v.texts[id].find("unused") != std::string::npos) {
      attr |= kAttrUnused;
    }
  }
  if (v.eos) v.eog[*v.eos] = 1;
  if (v.eot) v.eog[*v.eot] = 1;
  // gpt-oss and solar-open use <|end|> between messages: not EOG when <|return|>/<|call|>
  // (or <|calls|>/<|flush|>) are there; gemma4's </s> likewise next to <|tool_response>.
  const auto has = [&](std::string_view t) { return v.find(t) >= 0; };
  const int32_t end_id = v.find("<|end|>");
  const bool harmony = has("<|return|>") && has("<|call|>");
  const bool solar = has("<|calls|>") && has("<|flush|>");
  if (end_id >= 0 && (harmony || solar)) {
    v.eog[end_id] = 0;
    v.attrs[end_id] = kAttrUserDefined;
  }
  const int32_t s_id = v.find("</s>");
  if (s_id >= 0 && has("<|tool_response>")) {
    v.eog[s_id] = 0;
    v.attrs[s_id] = kAttrNormal;
  }

  for (int32_t id = 0; id < n; ++id) {
    if (v.attrs[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) v.special_ids.push_back(id);
  }
  std::stable_sort(v.special_ids.begin(), v.special_ids.end(), [&](int32_t a, int32_t b) {
    return v.texts[a].size() > v.texts[b].size();
  });
}

// token_to_piece with special=false, as llama.cpp's piece cache.
Status build_pieces(Vocab& v) {
  v.pieces.resize(v.texts.size());
  for (size_t id = 0; id < v.texts.size(); ++id) {
    const uint8_t attr = v.attrs[id];
    const std::string& text = v.texts[id];
    if (attr & (kAttrControl | kAttrUnknown)) continue;
    if (attr & kAttrUserDefined) {
      v.pieces[id] = text;
    } else if (attr & kAttrNormal) {
      v.pieces[id] = v.kind == TokenizerKind::kSpm ? replace_all(text, kSpaceMarker, " ")
                                                   : decode_byte_level(text);
    } else if (attr & kAttrByte) {
      const int b = parse_byte_token(text);
      if (b < 0) {
        return invalid_argument("byte token " + std::to_string(id) + " '" + text +
                                "' is not <0xNN>");
      }
      v.pieces[id] = std::string(1, char(b));
    }
  }
  return {};
}

}  // namespace

Result<Vocab> build_vocab(VocabData data) {
  Vocab v;
  v.kind = data.kind;
  const size_t n = data.tokens.size();
  if (n == 0) return invalid_argument("the vocabulary has no tokens");
  if (n > size_t(std::numeric_limits<int32_t>::max())) return invalid_argument("too many tokens");
  const int32_t n_tokens = int32_t(n);
  if (!data.scores.empty() && data.scores.size() != n) {
    return invalid_argument("scores has " + std::to_string(data.scores.size()) + " entries for " +
                            std::to_string(n) + " tokens");
  }
  if (!data.token_types.empty() && data.token_types.size() != n) {
    return invalid_argument("token_type has " + std::to_string(data.token_types.size()) +
                            " entries for " + std::to_string(n) + " tokens");
  }
  if (v.kind == TokenizerKind::kBpe) {
    BITNET_ASSIGN_OR_RETURN(v.pre, parse_pre_tokenizer(data.pre));
  } else {
    // llama.cpp's SPM defaults, used when the metadata names none (and they are in range).
    const auto fallback = [&](std::optional<int32_t>& id, int32_t def) {
      if (!id && def < n_tokens) id = def;
    };
    fallback(data.bos_id, 1);
    fallback(data.eos_id, 2);
    fallback(data.unk_id, 0);
  }
  BITNET_RETURN_IF_ERROR(check_id(data.bos_id, "bos_token_id", n_tokens));
  BITNET_RETURN_IF_ERROR(check_id(data.eos_id, "eos_token_id", n_tokens));
  BITNET_RETURN_IF_ERROR(check_id(data.eot_id, "eot_token_id", n_tokens));
  BITNET_RETURN_IF_ERROR(check_id(data.unk_id, "unknown_token_id", n_tokens));
  BITNET_RETURN_IF_ERROR(check_id(data.pad_id, "padding_token_id", n_tokens));
  v.bos = data.bos_id;
  v.eos = data.eos_id;
  v.eot = data.eot_id;
  v.unk = data.unk_id;
  v.pad = data.pad_id;
  const bool spm = v.kind == TokenizerKind::kSpm;
  v.add_bos = data.add_bos.value_or(spm || v.pre.add_bos);
  v.add_space_prefix = data.add_space_prefix.value_or(spm);

  v.texts = std::move(data.tokens);
  v.scores = data.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(data.scores);
  v.attrs.assign(n, kAttrNormal);
  v.ids.reserve(n);
  for (int32_t id = 0; id < n_tokens; ++id) {
    std::string& text = v.texts[id];
    if (text.empty()) text = "[EMPTY_" + std::to_string(id) + "]";  // as llama.cpp
    if (!v.ids.try_emplace(text, id).second) {
      return invalid_argument("token '" + text + "' appears twice (ids " +
                              std::to_string(v.ids[text]) + " and " + std::to_string(id) + ")");
    }
    if (!data.token_types.empty()) v.attrs[id] = attr_from_type(data.token_types[id]);
  }
  if (v.kind == TokenizerKind::kBpe) BITNET_RETURN_IF_ERROR(index_merges(data.merges, v));

  v.byte_ids.fill(-1);
  if (spm) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      int32_t id = v.find(std::string_view(name, 6));
      if (id < 0) id = v.find(std::string(1, char(b)));
      v.byte_ids[b] = id;
    }
  }
  mark_special(v);
  BITNET_RETURN_IF_ERROR(build_pieces(v));
  return v;
}

}  // namespace bitnet::tok
