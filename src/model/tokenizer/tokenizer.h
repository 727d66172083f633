// Tokenizers built from GGUF metadata (tokenizer.ggml.*):
//  - "llama": SentencePiece-style (score-ordered bigram merges, byte fallback <0xNN>,
//    optional space prefix), as llama.cpp's llm_tokenizer_spm.
//  - "gpt2": byte-level BPE with a pre-tokenizer chosen by tokenizer.ggml.pre
//    ("llama-bpe" = Llama 3, which BitNet b1.58 2B-4T uses), as llama.cpp's llm_tokenizer_bpe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/status.h"

namespace bitnet {
namespace gguf { class File; }

enum class TokenizerKind { kSpm, kBpe };

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

// Everything a tokenizer is built from, as stored in GGUF metadata.
struct VocabData {
  TokenizerKind kind = TokenizerKind::kSpm;
  std::string pre;                     // tokenizer.ggml.pre ("llama-bpe", "default", ...)
  std::vector<std::string> tokens;     // tokenizer.ggml.tokens
  std::vector<float> scores;           // tokenizer.ggml.scores (SPM; may be empty for BPE)
  std::vector<int32_t> token_types;    // tokenizer.ggml.token_type (may be empty: all normal)
  std::vector<std::string> merges;     // tokenizer.ggml.merges ("a b"), BPE only
  std::optional<int32_t> bos_id, eos_id, eot_id, unk_id, pad_id;
  std::optional<bool> add_bos;         // tokenizer.ggml.add_bos_token
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix (SPM)
};

class Tokenizer {
 public:
  static Result<Tokenizer> from_gguf(const gguf::File& file);
  static Result<Tokenizer> from_vocab(VocabData vocab);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text -> ids. `add_bos` prepends BOS (when the vocabulary has one); with `parse_special`
  // control/user-defined tokens written in the text (e.g. "<|eot_id|>") become their ids.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // The bytes of one token as they appear in text (byte tokens and byte-level BPE decoded;
  // SPM's leading-space marker becomes a space). May be a partial UTF-8 sequence.
  std::string token_to_piece(int32_t id) const;
  std::string decode(std::span<const int32_t> ids) const;

  TokenizerKind kind() const;
  int32_t n_vocab() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  bool add_bos_default() const;      // the vocabulary's add_bos_token (default true for SPM)
  bool is_end_of_generation(int32_t id) const;  // EOS, EOT and the like
  const std::string& token_text(int32_t id) const;  // the raw vocabulary string

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bitnet
