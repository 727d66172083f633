// Pre-tokenizer splits, written as raw text (the byte-level mapping undone), and the
// Unicode helpers they rest on.
#include <gtest/gtest.h>

#include "model/tokenizer/pretokenize.h"
#include "model/tokenizer/test_util.h"
#include "model/tokenizer/unicode.h"

namespace bitnet::tok {
namespace {

std::vector<std::string> split(PreTokenizer pre, std::string_view text) {
  std::vector<std::string> words;
  pretokenize(pre, text, words);
  for (std::string& w : words) {
    std::string raw;
    for (uint32_t cpt : decode_utf8(w)) raw += char(unicode_to_byte(cpt));
    w = raw;
  }
  return words;
}

using Words = std::vector<std::string>;

TEST(Pretokenize, Llama3) {
  const auto s = [](std::string_view t) { return split(PreTokenizer::kLlama3, t); };
  EXPECT_EQ(s("Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(s("  Hello"), (Words{" ", " Hello"}));
  EXPECT_EQ(s("I'VE 'll"), (Words{"I", "'VE", " '", "ll"}));
  EXPECT_EQ(s("1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(s("a...!\n\nb"), (Words{"a", "...!\n\n", "b"}));
  EXPECT_EQ(s("x  \n\n  y"), (Words{"x", "  \n\n", " ", " y"}));
  EXPECT_EQ(s("end   "), (Words{"end", "   "}));
  EXPECT_EQ(s("(x"), (Words{"(x"}));
  EXPECT_EQ(s("\t\n"), (Words{"\t\n"}));
  EXPECT_EQ(s(""), Words{});
  // U+00A0 is whitespace for \s; the ideographic full stop is punctuation.
  EXPECT_EQ(s("a\xC2\xA0" "b\xE3\x80\x82"), (Words{"a", "\xC2\xA0" "b", "\xE3\x80\x82"}));
}

TEST(Pretokenize, Gpt2) {
  const auto s = [](std::string_view t) { return split(PreTokenizer::kGpt2, t); };
  EXPECT_EQ(s("Hello world's 1234"), (Words{"Hello", " world", "'s", " 1234"}));
  EXPECT_EQ(s("I'VE"), (Words{"I", "'", "VE"}));  // contractions are case-sensitive here
  EXPECT_EQ(s("a  b"), (Words{"a", " ", " b"}));
  EXPECT_EQ(s(" !?"), (Words{" !?"}));
  EXPECT_EQ(s("x\n\n"), (Words{"x", "\n\n"}));
}

TEST(Pretokenize, DigitsThenGpt2) {
  const auto s = [](std::string_view t) { return split(PreTokenizer::kDigitsThenGpt2, t); };
  // Every number on its own first (\p{N}, non-ASCII numbers too), then GPT-2 in the gaps.
  EXPECT_EQ(s("Hello world's 1234"), (Words{"Hello", " world", "'s", " ", "1", "2", "3", "4"}));
  EXPECT_EQ(s("1. Energy"), (Words{"1", ".", " Energy"}));
  EXPECT_EQ(s("x\xD9\xA3y"), (Words{"x", "\xD9\xA3", "y"}));  // U+0663 ARABIC-INDIC DIGIT THREE
}

TEST(Pretokenize, Default) {
  const auto s = [](std::string_view t) { return split(PreTokenizer::kDefault, t); };
  // Punctuation runs split first, then GPT-2, then digit runs, then ASCII digit triples.
  EXPECT_EQ(s("Hello, world!"), (Words{"Hello", ",", " world", "!"}));
  EXPECT_EQ(s("a 1234567"), (Words{"a", " ", "123", "456", "7"}));
  EXPECT_EQ(s("`x`"), (Words{"`", "x", "`"}));
}

TEST(Pretokenize, Qwen2) {
  const auto s = [](std::string_view t) { return split(PreTokenizer::kQwen2, t); };
  EXPECT_EQ(s("a 1234"), (Words{"a", " ", "1", "2", "3", "4"}));
  EXPECT_EQ(s("I'VE 'll"), (Words{"I", "'VE", " '", "ll"}));
}

// Each input of a llama.cpp-format .inp file split by `pre`, the byte-level words joined by
// spaces (they never hold a raw space or newline), one line per input.
std::vector<std::string> split_lines(PreTokenizer pre, const std::string& inp) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> lines;
  for (size_t p = 0; p < inp.size();) {
    const size_t q = inp.find(sep, p);
    const std::string text = inp.substr(p, q == std::string::npos ? std::string::npos : q - p);
    std::vector<std::string> words;
    pretokenize(pre, text, words);
    std::string line;
    for (const std::string& w : words) line += (line.empty() ? "" : " ") + w;
    lines.push_back(line);
    if (q == std::string::npos) break;
    p = q + sep.size();
  }
  return lines;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path, std::ios::binary);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// llama.cpp's own unicode_regex_split with its qwen2 regex, on llama.cpp's llama-bpe test
// inputs (../shared) and on inputs of ours (testdata/pretokenize-extra.inp): digits,
// contractions in every case, \r\n runs, non-ASCII letters, numbers and spaces.
// testdata/README.md says how the .out files were made.
TEST(Pretokenize, Qwen2MatchesLlamaCpp) {
  const std::string data = BITNET_TOKENIZER_TESTDATA;
  struct Case { std::string inp, out; };
  int compared = 0;
  for (const Case& c : {Case{test::shared_path("golden/tokenizer/ggml-vocab-llama-bpe.gguf.inp"), data + "/llama-bpe-inp.qwen2.out"},
                        Case{data + "/pretokenize-extra.inp", data + "/pretokenize-extra.qwen2.out"}}) {
    const auto inp = test::read_text(c.inp);
    if (!inp) {
      std::printf("missing test data: %s (skipped)\n", c.inp.c_str());
      continue;
    }
    const std::vector<std::string> want = read_lines(c.out);
    const std::vector<std::string> got = split_lines(PreTokenizer::kQwen2, *inp);
    ASSERT_EQ(got.size(), want.size()) << c.out;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << c.inp << " input " << i;
    ++compared;
  }
  if (compared < 2) GTEST_SKIP() << "missing test data: " << test::shared_path("golden/tokenizer/ggml-vocab-llama-bpe.gguf.inp");
}

TEST(Pretokenize, ParsesNames) {
  EXPECT_EQ(parse_pre_tokenizer("llama-bpe")->split, PreTokenizer::kLlama3);
  EXPECT_TRUE(parse_pre_tokenizer("llama-bpe")->ignore_merges);
  EXPECT_EQ(parse_pre_tokenizer("gpt-2")->split, PreTokenizer::kGpt2);
  EXPECT_EQ(parse_pre_tokenizer("smollm")->split, PreTokenizer::kDigitsThenGpt2);
  EXPECT_FALSE(parse_pre_tokenizer("smollm")->add_bos);
  EXPECT_EQ(parse_pre_tokenizer("")->split, PreTokenizer::kDefault);
  EXPECT_EQ(parse_pre_tokenizer("qwen2")->split, PreTokenizer::kQwen2);
  EXPECT_EQ(parse_pre_tokenizer("deepseek-r1-qwen")->split, PreTokenizer::kQwen2);
  EXPECT_FALSE(parse_pre_tokenizer("qwen2")->add_bos);
  const auto bad = parse_pre_tokenizer("chatglm-bpe");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(bad.status().message().find("chatglm-bpe"), std::string::npos);
}

TEST(Unicode, DecodesLikeLlamaCpp) {
  EXPECT_EQ(decode_utf8("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(decode_utf8("\xF0\x9F\xA6\x99"), (std::vector<uint32_t>{0x1F999}));
  // Stray continuation, truncated sequence, bad lead byte: one U+FFFD per byte.
  EXPECT_EQ(decode_utf8("\x80"), (std::vector<uint32_t>{kReplacementChar}));
  EXPECT_EQ(decode_utf8("\xE2\x82"), (std::vector<uint32_t>{kReplacementChar, kReplacementChar}));
  EXPECT_EQ(decode_utf8("\xFFz"), (std::vector<uint32_t>{kReplacementChar, 'z'}));
  EXPECT_EQ(decode_utf8("\xF7\xBF\xBF\xBF").front(), kReplacementChar);  // beyond U+10FFFF
}

TEST(Unicode, FlagsAndByteMapping) {
  EXPECT_TRUE(cpt_flags('a') & kCptLetter);
  EXPECT_TRUE(cpt_flags(0x4E2D) & kCptLetter);   // CJK
  EXPECT_TRUE(cpt_flags(0x0663) & kCptNumber);   // Arabic-Indic 3
  EXPECT_TRUE(cpt_flags(0x0301) & kCptMark);     // combining acute
  EXPECT_TRUE(cpt_flags(0x3000) & kCptWhitespace);
  EXPECT_TRUE(cpt_flags(0x85) & kCptWhitespace);
  EXPECT_FALSE(cpt_flags(0x200B) & kCptWhitespace);  // zero-width space is not \s
  EXPECT_NE(cpt_flags(0xE0000), 0);  // unassigned still has a class
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");  // 'Ġ'
  EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // 'Ċ'
  EXPECT_EQ(byte_to_unicode('A'), "A");
  for (int b = 0; b < 256; ++b) {
    const auto cpts = decode_utf8(byte_to_unicode(uint8_t(b)));
    ASSERT_EQ(cpts.size(), 1u);
    EXPECT_EQ(unicode_to_byte(cpts[0]), b);
  }
  EXPECT_EQ(unicode_to_byte(0x4E2D), -1);
}

}  // namespace
}  // namespace bitnet::tok
