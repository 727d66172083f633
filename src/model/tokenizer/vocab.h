// The checked, indexed form of VocabData that the encoders and decoder work on.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bitnet/status.h"
#include "model/tokenizer/pretokenize.h"
#include "model/tokenizer/tokenizer.h"

namespace bitnet::tok {

// Token attributes as llama.cpp derives them from token_type (a bit set: llama.cpp adds
// kControl to EOG-looking tokens and kUnused to control tokens named "unused").
enum TokenAttr : uint8_t {
  kAttrUnknown = 1 << 0,
  kAttrUnused = 1 << 1,
  kAttrNormal = 1 << 2,
  kAttrControl = 1 << 3,
  kAttrUserDefined = 1 << 4,
  kAttrByte = 1 << 5,
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Merge {
  int32_t rank;    // position in tokenizer.ggml.merges: lower merges first
  int32_t result;  // id of the merged token
};

struct Vocab {
  TokenizerKind kind = TokenizerKind::kSpm;
  PreTokenizerConfig pre;
  std::vector<std::string> texts;  // id -> vocabulary string
  std::vector<float> scores;       // id -> SPM score (0 when the vocabulary has none)
  std::vector<uint8_t> attrs;      // id -> TokenAttr bits
  std::vector<std::string> pieces;  // id -> token_to_piece (control/unknown: "")
  std::vector<uint8_t> eog;         // id -> 1 when it ends generation
  TokenMap ids;                     // vocabulary string -> id
  std::unordered_map<uint64_t, Merge> merges;  // (left id << 32 | right id) -> merge
  // Control, user-defined and unknown tokens, longest text first: the order llama.cpp's
  // tokenizer_st_partition tries them in.
  std::vector<int32_t> special_ids;
  std::array<int32_t, 256> byte_ids{};  // SPM byte fallback: <0xNN> (or the byte itself), -1
  std::optional<int32_t> bos, eos, eot, unk, pad;
  bool add_bos = false;
  bool add_space_prefix = false;

  int32_t n_tokens() const { return static_cast<int32_t>(texts.size()); }
  // -1 when `text` is not a token.
  int32_t find(std::string_view text) const {
    const auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  }
  const Merge* find_merge(int32_t left, int32_t right) const {
    const auto it = merges.find((uint64_t(uint32_t(left)) << 32) | uint32_t(right));
    return it == merges.end() ? nullptr : &it->second;
  }
};

// Checks `data` and indexes it; inconsistent data is kInvalidArgument naming the problem.
Result<Vocab> build_vocab(VocabData data);

// SentencePiece BPE over `text` (spaces already written as U+2581), as llama.cpp's
// llm_tokenizer_spm_session: highest-score bigram first, byte fallback for leftovers.
void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

// Byte-level BPE over `text`: pre-tokenize, then merge each word by rank, as llama.cpp's
// llm_tokenizer_bpe_session.
void bpe_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

}  // namespace bitnet::tok
