#include "model/tokenizer/fuzz_entry.h"

#include <array>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"

namespace bitnet {

VocabData spm_byte_vocab() {
  VocabData d;
  d.tokens = {"<unk>", "<s>", "</s>"};
  d.token_types = {int32_t(TokenType::kUnknown), int32_t(TokenType::kControl), int32_t(TokenType::kControl)};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    d.tokens.emplace_back(name);
    d.token_types.push_back(int32_t(TokenType::kByte));
  }
  d.scores.assign(d.tokens.size(), 0.0f);
  d.unk_id = 0;
  d.bos_id = 1;
  d.eos_id = 2;
  return d;
}
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // SPM's U+2581 word marker

// <unk> <s> </s>, 256 byte tokens, then a few pieces and a user-defined token.
VocabData spm_vocab(bool space_prefix) {
  VocabData d = spm_byte_vocab();
  const std::string sp(kSpace);
  for (const std::string& piece : {sp, std::string("a"), std::string("b"), std::string("ab"), sp + "a",
                                   sp + "ab", std::string("\xC3\xA9"), sp + sp, std::string("<tool>")}) {
    d.tokens.push_back(piece);
    d.token_types.push_back(int32_t(TokenType::kNormal));
  }
  d.token_types.back() = int32_t(TokenType::kUserDefined);
  d.scores.resize(d.tokens.size());
  for (size_t i = 0; i < d.scores.size(); ++i) d.scores[i] = -static_cast<float>(i % 7);
  d.add_space_prefix = space_prefix;
  return d;
}

// 256 byte tokens, merges of common pairs, then BOS and an end-of-turn control token.
VocabData bpe_vocab(std::string pre) {
  const auto mapped = [](std::string_view raw) {
    std::string s;
    for (char c : raw) s += tok::byte_to_unicode(static_cast<uint8_t>(c));
    return s;
  };
  VocabData d;
  d.kind = TokenizerKind::kBpe;
  d.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) d.tokens.emplace_back(tok::byte_to_unicode(static_cast<uint8_t>(b)));
  const std::array<std::array<std::string_view, 2>, 8> merges = {{
      {"t", "h"}, {"th", "e"}, {" ", "the"}, {"1", "2"}, {"\n", "\n"}, {"'", "s"}, {" ", " "}, {"\xC3", "\xA9"}}};
  for (const auto& [l, r] : merges) {
    d.merges.push_back(mapped(l) + " " + mapped(r));
    d.tokens.push_back(mapped(std::string(l) + std::string(r)));
  }
  d.tokens.push_back("<|begin_of_text|>");
  d.tokens.push_back("<|eot_id|>");
  d.token_types.assign(d.tokens.size(), int32_t(TokenType::kNormal));
  d.token_types[d.tokens.size() - 2] = int32_t(TokenType::kControl);
  d.token_types[d.tokens.size() - 1] = int32_t(TokenType::kControl);
  d.bos_id = static_cast<int32_t>(d.tokens.size() - 2);
  d.eot_id = static_cast<int32_t>(d.tokens.size() - 1);
  return d;
}

std::vector<Tokenizer> make_tokenizers() {
  std::vector<VocabData> vocabs = {spm_vocab(true), spm_vocab(false)};
  // One name per pre-tokenizer family (pretokenize.cpp), "default" included.
  for (const char* pre : {"default", "gpt-2", "llama-bpe", "dbrx", "qwen2", "smollm"}) vocabs.push_back(bpe_vocab(pre));
  std::vector<Tokenizer> out;
  for (VocabData& v : vocabs) {
    auto tok = Tokenizer::from_vocab(std::move(v));
    BITNET_CHECK(tok.ok());
    out.push_back(std::move(tok).value());
  }
  return out;
}

bool valid_utf8(std::string_view text) {
  std::string again;
  for (uint32_t c : tok::decode_utf8(text)) tok::append_utf8(again, c);
  return again == text;
}

}  // namespace

void tokenizer_fuzz_one(const uint8_t* data, size_t size) {
  static const std::vector<Tokenizer> tokenizers = make_tokenizers();
  if (size == 0) return;
  const Tokenizer& tok = tokenizers[data[0] % tokenizers.size()];
  const bool add_bos = (data[0] / tokenizers.size()) % 2 == 1;
  const bool parse_special = (data[0] / tokenizers.size() / 2) % 2 == 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::vector<int32_t> ids = tok.encode(text, add_bos, parse_special);
  for (int32_t id : ids) BITNET_CHECK(id >= 0 && id < tok.n_vocab());
  BITNET_CHECK(!add_bos || (!ids.empty() && ids[0] == *tok.bos_id()));
  volatile size_t sink = tok.decode(ids).size();
  (void)sink;
  // The text's own tokens: after BOS, SPM keeps the space prefix (as llama.cpp's detokenize).
  const std::span<const int32_t> text_ids = std::span<const int32_t>(ids).subspan(add_bos ? 1 : 0);
  const std::string back = tok.decode(text_ids);
  std::string pieces;
  for (int32_t id : text_ids) pieces += tok.token_to_piece(id);
  if (parse_special) return;  // control tokens written in the text decode to nothing
  if (!valid_utf8(text)) return;  // see the header
  if (tok.kind() == TokenizerKind::kSpm) {
    // A literal U+2581 comes back as a space, and the text after a user-defined token gets its
    // own space prefix (both as in llama.cpp).
    if (text.find(kSpace) == std::string_view::npos && text.find("<tool>") == std::string_view::npos) {
      BITNET_CHECK(back == text);
    }
  } else {
    BITNET_CHECK(back == text && pieces == text);
  }
}

}  // namespace bitnet
