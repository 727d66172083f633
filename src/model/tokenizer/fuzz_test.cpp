// The tokenizer fuzz target's body (fuzz_entry.h) over deterministic mutations of texts that
// touch every path (byte fallback, merges, special tokens, invalid UTF-8) under plain ctest,
// plus the inputs the fuzzer has found (docs/reliability.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "model/tokenizer/fuzz_entry.h"
#include "model/tokenizer/tokenizer.h"

namespace bitnet {
namespace {

void run(const std::string& input) {
  tokenizer_fuzz_one(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

TEST(TokenizerFuzz, MutatedTextsRoundTrip) {
  const std::string seeds[] = {
      "the other the 12 12\n\n's", "ab \xE2\x96\x81" "a <tool>b</s>", "c\xC3\xA9  x\t\r\n y",
      "<|eot_id|>the<|begin_of_text|>", std::string("\0\x80\xFF\xE2\x82 a", 8),
      "\xF0\x9F\xA6\x99 \xE4\xBD\xA0\xE5\xA5\xBD e\xCC\x81 123456 'll 'S", "   ", ""};
  std::mt19937_64 rng(11);
  int runs = 0;
  for (const std::string& seed : seeds) {
    for (int flags = 0; flags < 64; ++flags) {
      std::string s = char(flags) + seed;
      for (int m = 0; m < 24; ++m) {
        // Byte 0 holds the flags; mutations go after it.
        if (s.size() > 1 && rng() % 2) s[1 + rng() % (s.size() - 1)] = char(rng());
        if (rng() % 4 == 0) s.insert(1 + rng() % s.size(), seed.substr(0, rng() % 6));
        run(s);
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, 8 * 64 * 24);
}

// Found by fuzz_tokenizer: SPM takes a symbol's length from its lead byte alone (llama.cpp's
// unicode_len_utf8), so a truncated 3-byte sequence (0xED) swallows the first two bytes of the
// space marker after it; the marker goes out as byte tokens and comes back as a literal U+2581.
TEST(TokenizerFuzz, SpmTruncatedSequenceSwallowsTheSpaceMarker) {
  VocabData d = spm_byte_vocab();
  d.tokens.insert(d.tokens.end(), {"\xE2\x96\x81", "b"});
  d.token_types.insert(d.token_types.end(), {int32_t(TokenType::kNormal), int32_t(TokenType::kNormal)});
  d.scores.assign(d.tokens.size(), 0.0f);
  d.add_space_prefix = false;
  auto tok = Tokenizer::from_vocab(std::move(d));
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const std::vector<int32_t> ids = tok->encode("\xED b", false, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{3 + 0xED, 3 + 0xE2, 3 + 0x96, 3 + 0x81, 3 + 256 + 1}));
  EXPECT_EQ(tok->decode(ids), "\xED\xE2\x96\x81" "b");
  for (const char* input : {"\x01\xED b", "\x08t\xCD ef", "\x01\xF0 \xE1  x"}) run(input);
}

// Found by fuzz_tokenizer: the text after a user-defined token gets SPM's space prefix again
// (as llama.cpp; SpmTokenizer.SpecialTokensAndSpacePrefix pins the ids), so "<tool>\n y" comes
// back as "<tool> \n y": not a round trip the body may demand.
TEST(TokenizerFuzz, SpmSpacePrefixAfterAUserDefinedToken) {
  run(std::string("\0\0\0\0\0\0\0\0\0\0<tool>\n y", 19));
  run(std::string("\x01<tool>x", 8));
}

}  // namespace
}  // namespace bitnet
