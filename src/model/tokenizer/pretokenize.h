// Byte-level BPE pre-tokenizers: split text into words by the regex a vocabulary was trained
// with, then write each word with GPT-2's byte-to-character mapping, as llama.cpp's
// unicode_regex_split does. The regexes are hand-coded scanners (as llama.cpp's custom
// splitters), so no regex engine is involved and the cost is linear in the text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bitnet/status.h"

namespace bitnet::tok {

enum class PreTokenizer {
  // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // Qwen2: Llama 3's regex with \p{N} (every digit a word of its own) instead of \p{N}{1,3}.
  kQwen2,
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  kGpt2,
  // \p{N} (every number on its own), then GPT-2 within the pieces: llama.cpp's pre type for
  // "smollm" (SmolLM2), "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva".
  kDigitsThenGpt2,
  // llama.cpp's fallback for "default" or a missing pre: [\p{P}\$\+<=>\^~\|]+, then GPT-2,
  // then \p{N}+, then [0-9][0-9][0-9], each splitting the pieces of the one before.
  kDefault,
};

struct PreTokenizerConfig {
  PreTokenizer split = PreTokenizer::kDefault;
  bool ignore_merges = false;  // a word that is itself a token is not merged (Llama 3)
  bool add_bos = false;        // llama.cpp's add_bos default for this pre
};

// tokenizer.ggml.pre -> pre-tokenizer, with llama.cpp's names for the families above;
// an empty name is "default". Other names are kUnsupported.
Result<PreTokenizerConfig> parse_pre_tokenizer(std::string_view pre);

// Splits `text` into byte-level-encoded words (appended to `words`). Invalid UTF-8 becomes
// U+FFFD first, as in llama.cpp.
void pretokenize(PreTokenizer pre, std::string_view text, std::vector<std::string>& words);

}  // namespace bitnet::tok
