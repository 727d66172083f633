// Tokenizers against llama.cpp's outputs: its test-tokenizer-0 vectors (Llama 2 SPM, Llama 3
// BPE) and the prompt ids of the golden logits files.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "gguf/gguf.h"
#include "model/tokenizer/test_util.h"

namespace bitnet {
namespace {

constexpr const char* kStory =
    "Once upon a time, there was a little dog named Max. He liked to run and jump in the "
    "garden with his friends.";

std::string show(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (int32_t id : ids) s << id << ' ';
  return s.str();
}

// llama.cpp's test-tokenizer-0 tokenizes with add_special=false, parse_special=false.
void expect_vectors(const Tokenizer& tok, const std::string& base, size_t expected_cases) {
  const auto cases = test::read_vocab_cases(base);
  ASSERT_EQ(cases.size(), expected_cases) << "cannot read " << base << ".inp/.out";
  size_t matched = 0;
  for (const auto& c : cases) {
    const auto ids = tok.encode(c.text, /*add_bos=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids, c.ids) << "text: '" << c.text << "'\n got: " << show(ids)
                          << "\nwant: " << show(c.ids);
    matched += ids == c.ids;
  }
  std::printf("%s: %zu/%zu vectors match\n", base.c_str(), matched, cases.size());
}

// The `ids=` list of a golden .logits.txt file.
std::vector<int32_t> golden_ids(const std::string& path) {
  std::vector<int32_t> ids;
  const auto text = test::read_text(path);
  if (!text) return ids;
  const size_t at = text->find("ids=");
  if (at == std::string::npos) return ids;
  std::istringstream s(text->substr(at + 4));
  for (int32_t id; s >> id;) {
    ids.push_back(id);
    if (s.peek() == ',') s.ignore();
  }
  return ids;
}

Result<Tokenizer> open_tokenizer(const std::string& path) {
  auto file = gguf::File::open(path);
  if (!file) return file.status();
  return Tokenizer::from_gguf(*file);
}

TEST(TokenizerGolden, LlamaSpmVectors) {
  const std::string base = test::shared_path("golden/tokenizer/ggml-vocab-llama-spm.gguf");
  if (!std::filesystem::exists(base)) GTEST_SKIP() << "missing " << base;
  auto tok = open_tokenizer(base);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->kind(), TokenizerKind::kSpm);
  EXPECT_EQ(tok->n_vocab(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_TRUE(tok->is_end_of_generation(2));
  expect_vectors(*tok, base, 46);
}

class Llama3Golden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto data = test::load_llama3_vocab();
    if (!data) return;
    auto tok = Tokenizer::from_vocab(std::move(*data));
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    tok_ = new Tokenizer(std::move(tok).value());
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  void SetUp() override {
    if (!tok_) GTEST_SKIP() << "missing " << test::shared_path("models/llama3-tokenizer");
  }
  static Tokenizer* tok_;
};
Tokenizer* Llama3Golden::tok_ = nullptr;

TEST_F(Llama3Golden, BpeVectors) {
  const std::string base = test::shared_path("golden/tokenizer/ggml-vocab-llama-bpe.gguf");
  if (!std::filesystem::exists(base + ".inp")) GTEST_SKIP() << "missing " << base << ".inp";
  expect_vectors(*tok_, base, 46);
}

TEST_F(Llama3Golden, SpecialTokens) {
  EXPECT_EQ(tok_->n_vocab(), 128256);
  EXPECT_EQ(tok_->bos_id(), 128000);
  EXPECT_TRUE(tok_->add_bos_default());
  EXPECT_TRUE(tok_->is_end_of_generation(128009));  // <|eot_id|>, found by its text
  EXPECT_TRUE(tok_->is_end_of_generation(128001));  // <|end_of_text|> (EOS)
  EXPECT_FALSE(tok_->is_end_of_generation(9906));

  const std::string text = "Hello<|eot_id|> world";
  EXPECT_EQ(tok_->encode(text, false, true), (std::vector<int32_t>{9906, 128009, 1917}));
  const auto plain = tok_->encode(text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 128009), 0);
  EXPECT_GT(plain.size(), 3u);
  EXPECT_EQ(tok_->decode(plain), text);  // the special text was tokenized as text

  EXPECT_EQ(tok_->encode("Hello", true, false), (std::vector<int32_t>{128000, 9906}));
  // Control tokens decode to nothing (llama.cpp's token_to_piece with special=false).
  EXPECT_EQ(tok_->decode(std::vector<int32_t>{128000, 9906, 128009}), "Hello");
  EXPECT_EQ(tok_->token_text(128009), "<|eot_id|>");
}

TEST_F(Llama3Golden, RoundTripsUtf8) {
  const std::vector<std::string> texts = {
      "Hello, world! ",
      "  leading and trailing spaces  ",
      "tabs\tand\nnew\r\nlines\n\n\n",
      "emoji \xF0\x9F\xA6\x99\xF0\x9F\x9A\x80 and ZWJ "
      "\xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F",
      "CJK \xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8"
      "apple\xE5\xB7\xA5\xE4\xBD\x9C 1314151\xE5\xA4\xA9",
      "combining e\xCC\x81 a\xCC\x8A\xCC\xA3 and Hangul \xE1\x84\x80\xE1\x85\xA1",
      "\xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE \xD0\xBD\xD0\xB0 "
      "\xD0\x91\xD1\x8A\xD0\xBB\xD0\xB3\xD0\xB0\xD1\x80\xD1\x81\xD0\xBA\xD0\xB8",
      "numbers 3.14159 1234567 \xD9\xA3\xD9\xA4\xD9\xA5",
      "I've been 'told he's there, 'RE you sure? We'Ve a'lL",
      "nbsp\xC2\xA0" "and ideographic\xE3\x80\x80space",
      std::string("nul\0byte", 8),
  };
  for (const auto& text : texts) {
    EXPECT_EQ(tok_->decode(tok_->encode(text, false, false)), text) << text;
  }
  // Invalid UTF-8 becomes U+FFFD per bad byte (llama.cpp's unicode_cpts_from_utf8).
  EXPECT_EQ(tok_->decode(tok_->encode("a\xFF" "b\xC3", false, false)),
            "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
}

TEST(TokenizerGolden, Stories260K) {
  const std::string path = test::shared_path("models/stories260K-v1.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << path;
  auto tok = open_tokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->kind(), TokenizerKind::kSpm);
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_TRUE(tok->add_bos_default());

  const auto ids = tok->encode("Once upon a time", false, true);
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(tok->decode(ids), "Once upon a time");

  const auto golden = golden_ids(test::shared_path("golden/llamacpp/stories260K.logits.txt"));
  if (golden.empty()) GTEST_SKIP() << "missing stories260K.logits.txt";
  EXPECT_EQ(golden.front(), 1);
  EXPECT_EQ(tok->encode(kStory, true, true), golden);
  // With BOS first, llama.cpp keeps the space of the first word's piece.
  EXPECT_EQ(tok->decode(golden), std::string(" ") + kStory);
}

// SmolLM2's `smollm` pre-tokenizer (digits one by one, then GPT-2) and ChatML specials: the
// ids llama.cpp fed its model for ../shared/golden/llamacpp/smollm2-*.
TEST(TokenizerGolden, SmolLm2MatchesLlamaCpp) {
  const std::string path = test::shared_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << path;
  auto tok = open_tokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_FALSE(tok->add_bos_default());
  const auto text = golden_ids(test::shared_path("golden/llamacpp/smollm2-text.logits.txt"));
  const auto chat = golden_ids(test::shared_path("golden/llamacpp/smollm2-chat.logits.txt"));
  if (text.empty() || chat.empty()) GTEST_SKIP() << "missing smollm2-*.logits.txt";
  const std::string prompt = "The three laws of thermodynamics are";
  EXPECT_EQ(tok->encode(prompt, false, true), std::vector<int32_t>(text.begin(), text.begin() + 6));
  // The continuation has a numbered list: "1." is two tokens, digits never merge.
  const std::string whole = tok->decode(text);
  EXPECT_EQ(tok->encode(whole, false, true), text);
  const std::string chat_prompt =
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
      "<|im_start|>user\nWhat is the capital of France? Answer in one sentence.<|im_end|>\n"
      "<|im_start|>assistant\n";
  EXPECT_EQ(tok->encode(chat_prompt, false, true), std::vector<int32_t>(chat.begin(), chat.begin() + 42));
}

TEST(TokenizerGolden, TinyBitnetBpe) {
  const std::string path = test::shared_path("golden/llamacpp/tiny-bitnet-f32.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << path;
  auto tok = open_tokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->kind(), TokenizerKind::kBpe);
  EXPECT_EQ(tok->n_vocab(), 512);
  const auto golden = golden_ids(test::shared_path("golden/llamacpp/tiny-bitnet-f32.logits.txt"));
  if (golden.empty()) GTEST_SKIP() << "missing tiny-bitnet-f32.logits.txt";
  EXPECT_EQ(tok->bos_id(), golden.front());
  EXPECT_EQ(tok->encode(kStory, true, true), golden);
  EXPECT_EQ(tok->decode(golden), kStory);
  EXPECT_TRUE(tok->is_end_of_generation(*tok->eos_id()));
}

}  // namespace
}  // namespace bitnet
