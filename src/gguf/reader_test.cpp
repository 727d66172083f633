#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "gguf/gguf.h"
#include "gguf/test_util.h"

namespace bitnet::gguf {
namespace {

using testutil::parse_bytes;
using testutil::shared_path;

// Sum of n_bytes over all tensors, and the end of the last tensor's data in the file.
uint64_t total_tensor_bytes(const File& f) {
  uint64_t n = 0;
  for (const TensorInfo& t : f.tensors()) n += t.n_bytes;
  return n;
}

void expect_tensor(const File& f, std::string_view name, GgmlType type,
                   std::vector<int64_t> ne, uint64_t offset, uint64_t n_bytes) {
  const TensorInfo* t = f.find_tensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->type, type) << name;
  ASSERT_EQ(t->n_dims, static_cast<int>(ne.size())) << name;
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(t->ne[i], i < ne.size() ? ne[i] : 1) << name << " dim " << i;
  EXPECT_EQ(t->offset, offset) << name;
  EXPECT_EQ(t->n_bytes, n_bytes) << name;
}

TEST(GgufReader, Stories260kIsVersion1) {
  const std::string path = shared_path("models/stories260K-v1.gguf");
  BITNET_REQUIRE_SHARED(path);
  auto f = File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->version(), 1u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->metadata().size(), 18u);
  ASSERT_EQ(f->tensors().size(), 48u);

  EXPECT_EQ(*f->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(*f->get_string("general.name").value(), "tinyllamas-stories-260k");
  EXPECT_EQ(*f->get_u64("llama.context_length").value(), 512u);
  EXPECT_EQ(*f->get_u64("llama.embedding_length").value(), 64u);
  EXPECT_EQ(*f->get_u64("llama.block_count").value(), 5u);
  EXPECT_EQ(*f->get_u64("llama.feed_forward_length").value(), 172u);
  EXPECT_EQ(*f->get_i64("llama.attention.head_count").value(), 8);
  EXPECT_EQ(*f->get_u64("llama.attention.head_count_kv").value(), 4u);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_f64("llama.attention.layer_norm_rms_epsilon").value()),
                  1e-5f);
  EXPECT_EQ(*f->get_u64("tokenizer.ggml.bos_token_id").value(), 1u);
  EXPECT_EQ(*f->get_u64("tokenizer.ggml.eos_token_id").value(), 2u);

  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok() && tokens->has_value());
  ASSERT_EQ((*tokens)->size(), 512u);
  EXPECT_EQ((**tokens)[0], "<unk>");
  EXPECT_EQ((**tokens)[1], "<s>");
  EXPECT_EQ((**tokens)[2], "</s>");
  EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores").value()->size(), 512u);
  EXPECT_EQ(f->get_i32_array("tokenizer.ggml.token_type").value()->size(), 512u);

  // Header ends at 11450; the data section starts at 11456 and ends at the end of the file.
  expect_tensor(*f, "token_embd.weight", GgmlType::kF32, {64, 512}, 0, 131072);
  expect_tensor(*f, "blk.0.ffn_down.weight", GgmlType::kF32, {172, 64}, 224256, 44032);
  expect_tensor(*f, "blk.4.ffn_norm.weight", GgmlType::kF32, {64}, 1039616, 256);
  expect_tensor(*f, "output.weight", GgmlType::kF32, {64, 512}, 1040128, 131072);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->data, f->bytes().data() + 11456);
  EXPECT_EQ(11456 + total_tensor_bytes(*f), f->bytes().size());
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
  EXPECT_EQ(f->find("missing"), nullptr);
}

// The three llama.cpp files share the tokenizer and the F32 tensors; TQ types shrink the linears.
TEST(GgufReader, LlamaCppTinyBitnetFiles) {
  for (const char* rel : {"golden/llamacpp/tiny-bitnet-f32.gguf", "golden/llamacpp/tiny-bitnet-tq2_0.gguf",
                          "golden/llamacpp/tiny-bitnet-tq1_0.gguf"}) {
    const std::string path = shared_path(rel);
    BITNET_REQUIRE_SHARED(path);
    SCOPED_TRACE(path);
    auto f = File::open(path);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->metadata().size(), 22u);
    ASSERT_EQ(f->tensors().size(), 24u);
    EXPECT_EQ(*f->get_string("general.architecture").value(), "bitnet");
    EXPECT_EQ(*f->get_u64("bitnet.embedding_length").value(), 256u);
    EXPECT_EQ(*f->get_f64("bitnet.rope.freq_base").value(), 500000.0);
    EXPECT_EQ(*f->get_bool("tokenizer.ggml.add_bos_token").value(), true);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges").value()->size(), 254u);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").value()->size(), 512u);
    expect_tensor(*f, "token_embd.weight", GgmlType::kF32, {256, 512}, 0, 524288);
    expect_tensor(*f, "output_norm.weight", GgmlType::kF32, {256}, 524288, 1024);
    EXPECT_EQ(f->find_tensor("token_embd.weight")->data, f->bytes().data() + 12288);
  }
  const std::string tq2 = shared_path("golden/llamacpp/tiny-bitnet-tq2_0.gguf");
  auto f = File::open(tq2);
  ASSERT_TRUE(f.ok());
  // Offsets and sizes as gguf-py lists them.
  expect_tensor(*f, "blk.0.attn_q.weight", GgmlType::kTQ2_0, {256, 256}, 526336, 16896);
  expect_tensor(*f, "blk.0.ffn_down.weight", GgmlType::kTQ2_0, {768, 256}, 683520, 50688);
  expect_tensor(*f, "blk.1.ffn_sub_norm.weight", GgmlType::kF32, {768}, 889344, 3072);
  expect_tensor(*f, "blk.1.ffn_down.weight", GgmlType::kTQ2_0, {768, 256}, 892416, 50688);
  EXPECT_EQ(12288 + 892416 + 50688, f->bytes().size());

  auto f1 = File::open(shared_path("golden/llamacpp/tiny-bitnet-tq1_0.gguf"));
  ASSERT_TRUE(f1.ok());
  expect_tensor(*f1, "blk.0.attn_q.weight", GgmlType::kTQ1_0, {256, 256}, 526336, 13824);
}

TEST(GgufReader, IkLlamaB158) {
  const std::string path = shared_path("golden/ik_llama/tiny-b158-f32.gguf");
  BITNET_REQUIRE_SHARED(path);
  auto f = File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*f->get_string("general.architecture").value(), "bitnet-b1.58");
  ASSERT_EQ(f->tensors().size(), 24u);
  // 64 bytes more header than the llama.cpp file ("bitnet-b1.58." keys): data starts at 12352.
  EXPECT_EQ(f->find_tensor("token_embd.weight")->data, f->bytes().data() + 12352);
  EXPECT_EQ(12352 + total_tensor_bytes(*f), f->bytes().size());
}

// gguf-py refuses type 36; the I2_S tensors must come out as n/4 + 32 bytes.
TEST(GgufReader, BitnetCppI2s) {
  const std::string path = shared_path("golden/bitnetcpp/tiny-bitnet-i2_s.gguf");
  BITNET_REQUIRE_SHARED(path);
  auto f = File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ(f->tensors().size(), 24u);
  EXPECT_EQ(*f->get_u64("general.file_type").value(), 40u);  // LLAMA_FTYPE_MOSTLY_I2_S
  expect_tensor(*f, "token_embd.weight", GgmlType::kF16, {256, 512}, 0, 262144);
  expect_tensor(*f, "blk.0.attn_q.weight", GgmlType::kI2_S, {256, 256}, 264192, 65536 / 4 + 32);
  expect_tensor(*f, "blk.0.attn_k.weight", GgmlType::kI2_S, {256, 128}, 280608, 32768 / 4 + 32);
  expect_tensor(*f, "blk.1.ffn_down.weight", GgmlType::kI2_S, {768, 256}, 619936, 196608 / 4 + 32);
  int n_i2s = 0;
  for (const TensorInfo& t : f->tensors()) {
    if (t.type != GgmlType::kI2_S) continue;
    ++n_i2s;
    EXPECT_EQ(t.n_bytes, static_cast<uint64_t>(t.n_elems()) / 4 + 32) << t.name;
  }
  EXPECT_EQ(n_i2s, 14);
  EXPECT_EQ(12288 + 619936 + 196608 / 4 + 32, f->bytes().size());
}

// No tensors: gguf-py writes no padding after the header, so the aligned data section starts
// past the end of the file.
TEST(GgufReader, VocabOnlyFile) {
  const std::string path = shared_path("golden/tokenizer/ggml-vocab-llama-spm.gguf");
  BITNET_REQUIRE_SHARED(path);
  auto f = File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->metadata().size(), 22u);
  EXPECT_EQ(*f->get_string("tokenizer.ggml.model").value(), "llama");
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ((*tokens)->size(), 32000u);
  EXPECT_EQ((**tokens)[3], "<0x00>");
  auto types = f->get_i32_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  EXPECT_EQ((**types)[0], 2);
  EXPECT_EQ((**types)[1], 3);
  EXPECT_EQ((**types)[3], 6);
  EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores").value()->size(), 32000u);
  EXPECT_EQ(*f->get_bool("tokenizer.ggml.add_eos_token").value(), false);
}

TEST(GgufReader, OpenMissingFileIsIoError) {
  auto f = File::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kIoError);
}

TEST(GgufReader, TypedGettersConvertLosslessly) {
  const std::vector<uint8_t> bytes = testutil::small_file(3);
  auto f = parse_bytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();

  EXPECT_EQ(*f->get_u64("test.u8").value(), 200u);
  EXPECT_EQ(*f->get_i64("test.u8").value(), 200);
  EXPECT_EQ(*f->get_i64("test.i32").value(), -7);
  EXPECT_FALSE(f->get_u64("test.i32").ok());  // negative
  EXPECT_EQ(*f->get_u64("test.u64").value(), 1ull << 40);
  EXPECT_EQ(*f->get_f64("test.f32").value(), 0.5);
  EXPECT_FALSE(f->get_f64("test.u8").ok());   // ints are not floats
  EXPECT_FALSE(f->get_u64("test.f32").ok());
  EXPECT_EQ(*f->get_bool("test.bool").value(), true);
  EXPECT_FALSE(f->get_bool("test.u8").ok());
  EXPECT_FALSE(f->get_string("test.u8").ok());
  EXPECT_FALSE(f->get_u64("general.architecture").ok());

  // Absent keys are empty optionals, not errors.
  EXPECT_TRUE(f->get_u64("nope").ok());
  EXPECT_FALSE(f->get_u64("nope")->has_value());
  EXPECT_FALSE(f->get_string_array("nope")->has_value());

  EXPECT_EQ(**f->get_f32_array("tokenizer.ggml.scores"), (std::vector<float>{0.0f, -1.5f, 2.25f}));
  EXPECT_EQ(**f->get_i32_array("tokenizer.ggml.token_type"), (std::vector<int32_t>{2, 1, 1}));
  EXPECT_FALSE(f->get_f32_array("tokenizer.ggml.token_type").ok());
  EXPECT_FALSE(f->get_i32_array("tokenizer.ggml.scores").ok());
  EXPECT_FALSE(f->get_i32_array("tokenizer.ggml.tokens").ok());
  EXPECT_FALSE(f->get_string_array("tokenizer.ggml.token_type").ok());
  EXPECT_FALSE(f->get_string_array("general.architecture").ok());

  const Value* tokens = f->find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->type, ValueType::kArray);
  EXPECT_EQ(tokens->array_type, ValueType::kString);
  EXPECT_EQ(tokens->array_size, 3u);
  EXPECT_EQ(value_type_name(ValueType::kFloat64), "float64");
}

// get_i32_array widens small ints and narrows wide ones only when every element fits.
TEST(GgufReader, I32ArrayFromOtherIntTypes) {
  testutil::Raw raw(3);
  raw.count(0).count(3);
  raw.str("u8s").u32(9).u32(0).count(2).u8(7).u8(255);
  raw.str("u64s").u32(9).u32(10).count(2).u64(5).u64(uint64_t{1} << 31);
  raw.str("i64s").u32(9).u32(11).count(2).u64(static_cast<uint64_t>(-5)).u64(static_cast<uint64_t>(-2147483648LL));
  auto f = parse_bytes(raw.bytes());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(**f->get_i32_array("u8s"), (std::vector<int32_t>{7, 255}));
  auto wide = f->get_i32_array("u64s");
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("element 1"), std::string::npos);
  EXPECT_EQ(**f->get_i32_array("i64s"), (std::vector<int32_t>{-5, INT32_MIN}));
}

TEST(GgufReader, NestedArraysParseAsRawBytes) {
  testutil::Raw raw(3);
  raw.count(0).count(1);
  // [[1, 2], []] of uint16
  raw.str("nested").u32(9).u32(9).count(2);
  raw.u32(2).count(2).u8(1).u8(0).u8(2).u8(0);
  raw.u32(2).count(0);
  auto f = parse_bytes(raw.bytes());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const Value* v = f->find("nested");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->array_type, ValueType::kArray);
  EXPECT_EQ(v->array_size, 2u);
  EXPECT_EQ(v->array_bytes.size(), 2u * (4 + 8) + 4);
  EXPECT_FALSE(f->get_i32_array("nested").ok());
}

TEST(GgufReader, ZeroSizedTensorIsAccepted) {
  Writer w;
  ASSERT_TRUE(w.add_tensor("empty", GgmlType::kF32, {0, 4}, {}).ok());
  ASSERT_TRUE(w.add_tensor("x", GgmlType::kF32, {8}, testutil::pattern_bytes(32, 1)).ok());
  const auto bytes = w.serialize();
  auto f = parse_bytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->find_tensor("empty")->n_bytes, 0u);
  EXPECT_EQ(f->find_tensor("empty")->n_elems(), 0);
}

}  // namespace
}  // namespace bitnet::gguf
