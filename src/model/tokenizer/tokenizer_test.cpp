// Tokenizer behaviour on small hand-made vocabularies: SPM merging and fallbacks, BPE merges,
// special tokens, decoding, hostile vocabulary data, and a linear-time check.
#include <gtest/gtest.h>

#include <chrono>

#include "model/tokenizer/test_util.h"

namespace bitnet {
namespace {

constexpr const char* kSpace = "\xE2\x96\x81";  // SPM's U+2581

// <unk>, <s>, </s>, then the given pieces with the given scores; optionally 256 byte tokens.
VocabData spm_vocab(const std::vector<std::pair<std::string, float>>& pieces, bool byte_tokens) {
  VocabData d;
  d.kind = TokenizerKind::kSpm;
  d.tokens = {"<unk>", "<s>", "</s>"};
  d.scores = {0, 0, 0};
  d.token_types = {int32_t(TokenType::kUnknown), int32_t(TokenType::kControl),
                   int32_t(TokenType::kControl)};
  if (byte_tokens) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      d.tokens.emplace_back(name);
      d.scores.push_back(0);
      d.token_types.push_back(int32_t(TokenType::kByte));
    }
  }
  for (const auto& [text, score] : pieces) {
    d.tokens.push_back(text);
    d.scores.push_back(score);
    d.token_types.push_back(int32_t(TokenType::kNormal));
  }
  return d;
}

Tokenizer make(VocabData d) {
  auto tok = Tokenizer::from_vocab(std::move(d));
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return std::move(tok).value();
}

int32_t id_of(const Tokenizer& tok, const std::string& text) {
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.token_text(id) == text) return id;
  }
  return -1;
}

TEST(SpmTokenizer, MergesByScoreAndFallsBackToBytes) {
  const std::string sp = kSpace;
  const Tokenizer tok = make(spm_vocab({{sp, -1}, {"a", -1}, {"b", -1}, {sp + "a", -2},
                                        {"ab", -0.5f}, {sp + "ab", -3}, {"c", -1}},
                                       true));
  // "▁ab": (a,b) scores -0.5 > (▁,a) -2, so "ab" forms first, then "▁ab".
  EXPECT_EQ(tok.encode("ab", false, false), (std::vector<int32_t>{id_of(tok, sp + "ab")}));
  EXPECT_EQ(tok.encode("ab", true, false), (std::vector<int32_t>{1, id_of(tok, sp + "ab")}));
  // 'é' is not a piece: its two UTF-8 bytes become <0xC3> <0xA9>.
  EXPECT_EQ(tok.encode("c\xC3\xA9", false, false),
            (std::vector<int32_t>{id_of(tok, sp), id_of(tok, "c"), id_of(tok, "<0xC3>"),
                                  id_of(tok, "<0xA9>")}));
  EXPECT_EQ(tok.decode(tok.encode("c\xC3\xA9 ab", false, false)), "c\xC3\xA9 ab");
  // Invalid UTF-8 survives SPM exactly: its bytes are byte tokens.
  EXPECT_EQ(tok.decode(tok.encode("a\x80\xBF b\xE2", false, false)), "a\x80\xBF b\xE2");
  EXPECT_TRUE(tok.encode("", true, false) == std::vector<int32_t>{1});
}

TEST(SpmTokenizer, UnknownWithoutByteTokens) {
  const Tokenizer tok = make(spm_vocab({{kSpace, -1}, {"a", -1}}, false));
  EXPECT_EQ(tok.encode("az", false, false), (std::vector<int32_t>{3, 4, 0}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{3, 4, 0}), "a");  // <unk> decodes to nothing
}

TEST(SpmTokenizer, SpecialTokensAndSpacePrefix) {
  VocabData d = spm_vocab({{kSpace, -1}, {"a", -1}, {"<tool>", 0}}, true);
  d.token_types.back() = int32_t(TokenType::kUserDefined);
  const Tokenizer tok = make(std::move(d));
  const int32_t sp = id_of(tok, kSpace);
  const int32_t a = id_of(tok, "a");
  const int32_t tool = id_of(tok, "<tool>");
  // Control tokens split the text only with parse_special; the text after one gets a prefix.
  EXPECT_EQ(tok.encode("a</s>a", false, true), (std::vector<int32_t>{sp, a, 2, sp, a}));
  const auto plain = tok.encode("a</s>a", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  // User-defined tokens always split, and decode to their text.
  EXPECT_EQ(tok.encode("a<tool>a", false, false), (std::vector<int32_t>{sp, a, tool, sp, a}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{sp, a, tool}), "a<tool>");
  EXPECT_EQ(tok.token_to_piece(sp), " ");
  EXPECT_EQ(tok.token_to_piece(2), "");
  EXPECT_EQ(tok.token_to_piece(id_of(tok, "<0x41>")), "A");

  VocabData no_prefix = spm_vocab({{kSpace, -1}, {"a", -1}}, true);
  no_prefix.add_space_prefix = false;
  const Tokenizer tok2 = make(std::move(no_prefix));
  EXPECT_EQ(tok2.encode("a a", false, false), (std::vector<int32_t>{a, sp, a}));
  EXPECT_EQ(tok2.decode(tok2.encode(" a", false, false)), " a");
}

TEST(BpeTokenizer, MergesByRank) {
  // "hello": l+l (rank 0), h+e (1), he+ll (2), hell+o (3); " world" has only " w" and "or".
  const Tokenizer tok = make(test::byte_level_vocab(
      {{"l", "l"}, {"h", "e"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {"o", "r"}}, "gpt-2"));
  const auto ids = tok.encode("hello world", false, false);
  std::vector<std::string> texts;
  for (int32_t id : ids) texts.push_back(tok.token_to_piece(id));
  EXPECT_EQ(texts, (std::vector<std::string>{"hello", " w", "or", "l", "d"}));
  EXPECT_EQ(tok.decode(ids), "hello world");
  EXPECT_FALSE(tok.add_bos_default());  // gpt-2 pre: llama.cpp adds no BOS by default
}

TEST(BpeTokenizer, RoundTripsArbitraryBytes) {
  const Tokenizer tok = make(test::byte_level_vocab({{"t", "h"}, {"th", "e"}, {" ", "the"}}));
  std::string all;
  for (int b = 1; b < 128; ++b) all += char(b);
  const std::vector<std::string> texts = {
      "the other the", all, "\xF0\x9F\xA6\x99 \xE4\xBD\xA0\xE5\xA5\xBD e\xCC\x81\xCC\xA3",
      "  \n\n \t x  ", "'s 'S 'll 'LL"};
  for (const auto& text : texts) {
    EXPECT_EQ(tok.decode(tok.encode(text, false, false)), text) << text;
  }
  // Invalid UTF-8: each bad byte becomes U+FFFD, as llama.cpp; no crash on truncation.
  EXPECT_EQ(tok.decode(tok.encode("\x80x\xE2\x82", false, false)),
            "\xEF\xBF\xBDx\xEF\xBF\xBD\xEF\xBF\xBD");
  // BOS and the control token.
  const auto ids = tok.encode("the<|eot_id|>", true, true);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], *tok.bos_id());
  EXPECT_EQ(tok.token_text(ids[2]), "<|eot_id|>");
  EXPECT_TRUE(tok.is_end_of_generation(ids[2]));
  EXPECT_EQ(tok.decode(ids), "the");
}

TEST(Tokenizer, OutOfRangeIdsDecodeToNothing) {
  const Tokenizer tok = make(test::byte_level_vocab({}));
  EXPECT_EQ(tok.token_to_piece(-1), "");
  EXPECT_EQ(tok.token_to_piece(tok.n_vocab()), "");
  EXPECT_EQ(tok.token_text(1 << 30), "");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{-5, int32_t('a'), 1 << 30}), "a");
  EXPECT_FALSE(tok.is_end_of_generation(-1));
}

TEST(Tokenizer, RejectsHostileVocabularies) {
  const auto fails = [](VocabData d, StatusCode code = StatusCode::kInvalidArgument) {
    auto tok = Tokenizer::from_vocab(std::move(d));
    EXPECT_FALSE(tok.ok());
    if (!tok.ok()) {
      EXPECT_EQ(tok.status().code(), code) << tok.status().to_string();
    }
  };
  fails(VocabData{});  // no tokens
  {
    VocabData d = spm_vocab({}, false);
    d.scores.pop_back();
    fails(d);
  }
  {
    VocabData d = spm_vocab({}, false);
    d.token_types.push_back(1);
    fails(d);
  }
  for (int32_t bad : {-1, 3, 1 << 30}) {
    VocabData d = spm_vocab({}, false);
    d.bos_id = bad;
    fails(d);
    d = spm_vocab({}, false);
    d.eot_id = bad;
    fails(d);
  }
  {
    VocabData d = spm_vocab({{"a", 0}, {"a", 0}}, false);  // duplicate token
    fails(d);
  }
  {
    VocabData d = spm_vocab({{"<0xZZ>", 0}}, false);
    d.token_types.back() = int32_t(TokenType::kByte);
    fails(d);
  }
  {
    VocabData d = test::byte_level_vocab({{"a", "b"}});
    d.merges.push_back("x yz");  // "yz" is not a token
    fails(d);
    d = test::byte_level_vocab({});
    d.merges.push_back("ab");  // no separator
    fails(d);
    d = test::byte_level_vocab({});
    d.merges.push_back("a b");  // "ab" is not a token
    fails(d);
  }
  {
    VocabData d = test::byte_level_vocab({});
    d.pre = "no-such-pre";
    fails(d, StatusCode::kUnsupported);
  }
  // Token types outside the enum are accepted as "undefined" (llama.cpp does the same).
  VocabData odd = test::byte_level_vocab({});
  odd.token_types[65] = 99;
  auto tok = Tokenizer::from_vocab(std::move(odd));
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->token_to_piece(65), "");
}

TEST(Tokenizer, LinearOnLargeInput) {
  // ~100 KB of mixed text through both tokenizers; a quadratic algorithm would take minutes.
  std::string text;
  while (text.size() < 100000) {
    text += "Once upon a time, \xE6\x88\x91\xE6\x83\xB3 there were 12345 dogs\n\tnamed Max. ";
  }
  const std::string long_word(20000, 'a');
  const Tokenizer bpe = make(test::byte_level_vocab({{"a", "a"}, {"aa", "aa"}, {"o", "n"}}));
  const std::string sp = kSpace;
  const Tokenizer spm = make(spm_vocab({{sp, -1}, {"a", -1}, {"aa", -1}, {"aaaa", -1}}, true));
  const auto start = std::chrono::steady_clock::now();
  for (const Tokenizer* tok : {&bpe, &spm}) {
    EXPECT_EQ(tok->decode(tok->encode(text, false, false)).size(), text.size());
    EXPECT_EQ(tok->decode(tok->encode(long_word, false, false)), long_word);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("tokenized 2 x %zu bytes in %.3f s\n", text.size() + long_word.size(), s);
}

}  // namespace
}  // namespace bitnet
