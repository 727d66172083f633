// Tokenizer::from_gguf on small GGUF files written in memory: what it reads, and the Status
// it returns for missing, mistyped or inconsistent tokenizer metadata.
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/tokenizer/tokenizer.h"

namespace bitnet {
namespace {

constexpr const char* kSpace = "\xE2\x96\x81";

// A 6-token SPM vocabulary; `edit` changes the writer before it is serialized.
template <class Edit>
Result<Tokenizer> spm_from(Edit edit) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens",
                     {"<unk>", "<s>", "</s>", kSpace, "a", std::string(kSpace) + "a"});
  w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1, -1, -0.5f});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1});
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  edit(w);
  const std::vector<uint8_t> bytes = w.serialize();
  auto file = gguf::File::parse(bytes, "vocab.gguf");
  if (!file) return file.status();
  // The tokenizer copies what it needs, so it outlives the file and its bytes.
  return Tokenizer::from_gguf(*file);
}

void expect_error(const Result<Tokenizer>& tok, StatusCode code, std::string_view needle) {
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), code) << tok.status().to_string();
  EXPECT_NE(tok.status().message().find(needle), std::string::npos) << tok.status().to_string();
  EXPECT_NE(tok.status().message().find("vocab.gguf"), std::string::npos);
}

TEST(TokenizerFromGguf, ReadsSpmMetadata) {
  auto tok = spm_from([](gguf::Writer&) {});
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->kind(), TokenizerKind::kSpm);
  EXPECT_EQ(tok->n_vocab(), 6);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos_default());  // SPM default without add_bos_token
  EXPECT_EQ(tok->encode("a a", true, false), (std::vector<int32_t>{1, 5, 5}));
  EXPECT_TRUE(tok->is_end_of_generation(2));

  auto no_prefix = spm_from([](gguf::Writer& w) {
    w.set_bool("tokenizer.ggml.add_space_prefix", false);
    w.set_bool("tokenizer.ggml.add_bos_token", false);
  });
  ASSERT_TRUE(no_prefix.ok());
  EXPECT_FALSE(no_prefix->add_bos_default());
  EXPECT_EQ(no_prefix->encode("a a", false, false), (std::vector<int32_t>{4, 5}));
}

TEST(TokenizerFromGguf, AcceptsIntegerScores) {
  auto tok = spm_from([](gguf::Writer& w) {
    w.set_i32_array("tokenizer.ggml.scores", {0, 0, 0, -2, -2, -1});
  });
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->encode("a", false, false), (std::vector<int32_t>{5}));
}

TEST(TokenizerFromGguf, RejectsBadMetadata) {
  expect_error(spm_from([](gguf::Writer& w) { w.set_string("tokenizer.ggml.model", "bert"); }),
               StatusCode::kUnsupported, "bert");
  expect_error(spm_from([](gguf::Writer& w) {
                 w.set_i32_array("tokenizer.ggml.tokens", {1, 2, 3});
               }),
               StatusCode::kCorruptFile, "tokenizer.ggml.tokens");
  expect_error(spm_from([](gguf::Writer& w) {
                 w.set_string_array("tokenizer.ggml.scores", {"x"});
               }),
               StatusCode::kCorruptFile, "tokenizer.ggml.scores");
  expect_error(spm_from([](gguf::Writer& w) { w.set_f32_array("tokenizer.ggml.scores", {0}); }),
               StatusCode::kCorruptFile, "scores");
  expect_error(spm_from([](gguf::Writer& w) { w.set_u32("tokenizer.ggml.bos_token_id", 6); }),
               StatusCode::kCorruptFile, "bos_token_id");
  expect_error(spm_from([](gguf::Writer& w) {
                 w.set_u64("tokenizer.ggml.eos_token_id", uint64_t(1) << 40);
               }),
               StatusCode::kCorruptFile, "eos_token_id");
  expect_error(spm_from([](gguf::Writer& w) {
                 w.set_string("tokenizer.ggml.add_bos_token", "yes");
               }),
               StatusCode::kCorruptFile, "add_bos_token");
}

TEST(TokenizerFromGguf, RejectsMissingKeys) {
  gguf::Writer w;
  w.set_string_array("tokenizer.ggml.tokens", {"a"});
  auto bytes = w.serialize();
  auto file = gguf::File::parse(bytes, "vocab.gguf");
  ASSERT_TRUE(file.ok());
  expect_error(Tokenizer::from_gguf(*file), StatusCode::kNotFound, "tokenizer.ggml.model");

  gguf::Writer bpe;
  bpe.set_string("tokenizer.ggml.model", "gpt2");
  bpe.set_string("tokenizer.ggml.pre", "llama-bpe");
  bpe.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
  bytes = bpe.serialize();
  file = gguf::File::parse(bytes, "vocab.gguf");
  ASSERT_TRUE(file.ok());
  expect_error(Tokenizer::from_gguf(*file), StatusCode::kNotFound, "tokenizer.ggml.merges");

  bpe.set_string_array("tokenizer.ggml.merges", {"a b"});
  bpe.set_string("tokenizer.ggml.pre", "chatglm-bpe");
  bytes = bpe.serialize();
  file = gguf::File::parse(bytes, "vocab.gguf");
  ASSERT_TRUE(file.ok());
  expect_error(Tokenizer::from_gguf(*file), StatusCode::kUnsupported, "chatglm-bpe");

  bpe.set_string("tokenizer.ggml.pre", "llama-bpe");
  bytes = bpe.serialize();
  file = gguf::File::parse(bytes, "vocab.gguf");
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->encode("ab", false, false), (std::vector<int32_t>{2}));
  EXPECT_FALSE(tok->bos_id().has_value());  // no default BOS for BPE (see README.md)
}

}  // namespace
}  // namespace bitnet
