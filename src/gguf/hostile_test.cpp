// Hostile GGUF files, one per past parser bug class (docs: FORMATS.md "GGUF hardening").
// Each must come back as an error Status: no crash, no huge allocation, no read past the input.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "gguf/gguf.h"
#include "gguf/test_util.h"

namespace bitnet::gguf {
namespace {

using testutil::find_bytes;
using testutil::parse_bytes;
using testutil::patch;
using testutil::Raw;
using testutil::small_file;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// Asserts `bytes` fail to parse with `code` and a message holding `part` (and the file name).
void expect_error(const std::vector<uint8_t>& bytes, StatusCode code, std::string_view part) {
  auto f = parse_bytes(bytes, "hostile.gguf");
  ASSERT_FALSE(f.ok()) << "parsed a hostile file; expected: " << part;
  EXPECT_EQ(f.status().code(), code) << f.status().to_string();
  EXPECT_EQ(f.status().message().rfind("hostile.gguf: ", 0), 0u) << f.status().message();
  EXPECT_NE(f.status().message().find(part), std::string::npos)
      << "message: " << f.status().message() << "\nexpected to contain: " << part;
}

// Field offsets of a v3 tensor info, found from the (last) occurrence of its name.
struct TensorFields {
  size_t n_dims, dims, type, offset;
};
TensorFields tensor_fields(const std::vector<uint8_t>& b, std::string_view name, uint32_t n_dims) {
  const auto it = std::find_end(b.begin(), b.end(), name.begin(), name.end());
  EXPECT_NE(it, b.end());
  const size_t at = static_cast<size_t>(it - b.begin()) + name.size();
  return {at, at + 4, at + 4 + 8 * n_dims, at + 4 + 8 * n_dims + 4};
}

// Offset of the u32 value type that follows `key` in a v3 file (the value follows it).
size_t kv_type_at(const std::vector<uint8_t>& b, std::string_view key) {
  return find_bytes(b, key) + key.size();
}

// A v3 file with one tensor whose info fields are given raw, and `data_bytes` of data.
std::vector<uint8_t> one_tensor(std::vector<uint64_t> ne, uint32_t type, uint64_t offset,
                                size_t data_bytes) {
  Raw raw(3);
  raw.count(1).count(0).str("t").u32(static_cast<uint32_t>(ne.size()));
  for (uint64_t d : ne) raw.u64(d);
  raw.u32(type).u64(offset).pad(32).zeros(data_bytes);
  return raw.bytes();
}

TEST(GgufHostile, ValidBaseFilesParse) {
  for (uint32_t v : {1u, 2u, 3u}) {
    const auto bytes = small_file(v);
    auto f = parse_bytes(bytes);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(f->tensors().size(), 2u);
  }
}

TEST(GgufHostile, BadMagic) {
  auto b = small_file(3);
  b[0] = 'X';
  expect_error(b, StatusCode::kCorruptFile, "not a GGUF file");
  expect_error({}, StatusCode::kCorruptFile, "too short");
  expect_error({'G', 'G', 'U', 'F'}, StatusCode::kCorruptFile, "too short");
}

TEST(GgufHostile, UnknownVersion) {
  for (uint32_t version : {0u, 4u, 0xFFFFu, 0xFFFFFFFFu}) {
    auto b = small_file(3);
    patch<uint32_t>(&b, 4, version);
    expect_error(b, StatusCode::kUnsupported, "unsupported GGUF version");
  }
}

TEST(GgufHostile, BigEndianFileIsNamed) {
  auto b = small_file(3);
  patch<uint32_t>(&b, 4, 0x03000000);  // 00 00 00 03
  expect_error(b, StatusCode::kUnsupported, "big-endian");
}

// Every strict prefix of a valid file is an error. Each prefix is copied into an allocation of
// its exact size so that AddressSanitizer catches any read past it.
TEST(GgufHostile, EveryTruncationIsAnError) {
  for (uint32_t v : {1u, 2u, 3u}) {
    const auto full = small_file(v);
    for (size_t n = 0; n < full.size(); ++n) {
      const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
      auto f = parse_bytes(prefix);
      ASSERT_FALSE(f.ok()) << "version " << v << ": prefix of " << n << " bytes parsed";
      ASSERT_TRUE(f.status().code() == StatusCode::kCorruptFile) << f.status().to_string();
    }
  }
}

// CVE-2024-21836, CVE-2024-23605: counts that would overflow an allocation.
TEST(GgufHostile, HugeCounts) {
  for (uint64_t n : {uint64_t{1} << 63, uint64_t{0xFFFFFFFF}, kU64Max, uint64_t{1} << 32}) {
    auto b = small_file(3);
    patch<uint64_t>(&b, 8, n);
    expect_error(b, StatusCode::kCorruptFile, "tensor count " + std::to_string(n));
    b = small_file(3);
    patch<uint64_t>(&b, 16, n);
    expect_error(b, StatusCode::kCorruptFile, "key-value count " + std::to_string(n));
  }
  auto v1 = small_file(1);
  patch<uint32_t>(&v1, 12, 0xFFFFFFFF);
  expect_error(v1, StatusCode::kCorruptFile, "key-value count 4294967295");
  v1 = small_file(1);
  patch<uint32_t>(&v1, 8, 0xFFFFFFFF);
  expect_error(v1, StatusCode::kCorruptFile, "tensor count 4294967295");
  // A count that fits the bytes but not the metadata that follows.
  auto b = small_file(3);
  patch<uint64_t>(&b, 8, 40);
  expect_error(b, StatusCode::kCorruptFile, "tensor count 40");
}

// CVE-2024-23496: string lengths.
TEST(GgufHostile, HugeStringLengths) {
  for (uint64_t n : {kU64Max, uint64_t{1} << 63, uint64_t{1} << 32, uint64_t{65536}}) {
    auto b = small_file(3);
    patch<uint64_t>(&b, 24, n);  // the first key's length
    expect_error(b, StatusCode::kCorruptFile, "key #0");
  }
  auto b = small_file(3);
  const size_t value_at = kv_type_at(b, "general.architecture") + 4;
  patch<uint64_t>(&b, value_at, uint64_t{1} << 63);
  expect_error(b, StatusCode::kCorruptFile, "key 'general.architecture'");
  b = small_file(3);
  patch<uint64_t>(&b, value_at, 1000000);
  expect_error(b, StatusCode::kCorruptFile, "runs past the end of the file");
}

// CVE-2024-21825: array lengths, and element count x element size overflow.
TEST(GgufHostile, HugeArrayLengths) {
  // 2^62 float32 elements are exactly 2^64 bytes: a wrapping product would read as 0.
  for (uint64_t n : {uint64_t{1} << 62, (uint64_t{1} << 62) + 1, kU64Max, uint64_t{1} << 40}) {
    auto b = small_file(3);
    patch<uint64_t>(&b, kv_type_at(b, "tokenizer.ggml.scores") + 8, n);
    expect_error(b, StatusCode::kCorruptFile, "array of " + std::to_string(n) + " float32");
    b = small_file(3);
    patch<uint64_t>(&b, kv_type_at(b, "tokenizer.ggml.tokens") + 8, n);
    expect_error(b, StatusCode::kCorruptFile, "array of " + std::to_string(n) + " string");
  }
  // 2^61 uint64 elements: 2^64 bytes again.
  Raw raw(3);
  raw.count(0).count(1).str("k").u32(9).u32(10).count(uint64_t{1} << 61).u64(1);
  expect_error(raw.bytes(), StatusCode::kCorruptFile, "array of 2305843009213693952 uint64");
  // An array element type that is not a value type.
  auto b = small_file(3);
  patch<uint32_t>(&b, kv_type_at(b, "tokenizer.ggml.scores") + 4, 13);
  expect_error(b, StatusCode::kCorruptFile, "array element type 13");
}

// CVE-2025-49847: a token claimed longer than 2^31 bytes.
TEST(GgufHostile, TokenLongerThan2GiB) {
  Raw raw(3);
  raw.count(0).count(1).str("tokenizer.ggml.tokens").u32(9).u32(8).count(2);
  raw.str("ok").count((uint64_t{1} << 31) + 1).str_bytes("short");
  expect_error(raw.bytes(), StatusCode::kCorruptFile, "element 1: string of 2147483649 bytes");
}

// CVE-2024-21802, CVE-2026-33298: dimension products and element count x type size.
TEST(GgufHostile, TensorSizeOverflows) {
  expect_error(one_tensor({uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0, 32), StatusCode::kCorruptFile,
               "element count overflows");
  expect_error(one_tensor({1u << 31, 1u << 31, 1u << 31, 1u << 31}, 0, 0, 32),
               StatusCode::kCorruptFile, "element count overflows");
  expect_error(one_tensor({uint64_t{1} << 62, 1}, 0, 0, 32), StatusCode::kCorruptFile,
               "larger than 2^63 - 1 bytes");
  expect_error(one_tensor({uint64_t{1} << 57, 256}, 15, 0, 32), StatusCode::kCorruptFile,
               "element count overflows");
  expect_error(one_tensor({uint64_t{1} << 63, 1}, 0, 0, 32), StatusCode::kCorruptFile,
               "negative as int64");
  expect_error(one_tensor({kU64Max}, 0, 0, 32), StatusCode::kCorruptFile, "negative as int64");
  // A row that is not a whole number of blocks.
  expect_error(one_tensor({16, 2}, 8, 0, 32), StatusCode::kCorruptFile, "not a multiple");
  expect_error(one_tensor({6}, 36, 0, 32), StatusCode::kCorruptFile, "not a multiple of 4");
}

// CVE-2025-53630, CVE-2026-27940: offset + size and padding overflows.
TEST(GgufHostile, OffsetOverflows) {
  expect_error(one_tensor({8}, 0, kU64Max - 31, 32), StatusCode::kCorruptFile, "overflows");
  expect_error(one_tensor({8}, 0, uint64_t{1} << 63, 32), StatusCode::kCorruptFile,
               "runs past the end of the file");
  expect_error(one_tensor({(uint64_t{1} << 61) - 1}, 0, uint64_t{1} << 63, 32),
               StatusCode::kCorruptFile, "overflows");
  expect_error(one_tensor({8}, 0, 32, 32), StatusCode::kCorruptFile,
               "runs past the end of the file");
  // The largest power-of-two alignment: the aligned data start lies far past the file.
  Raw raw(3);
  raw.count(1).count(1).str("general.alignment").u32(4).u32(1u << 31);
  raw.str("t").u32(1).u64(8).u32(0).u64(0).zeros(64);
  expect_error(raw.bytes(), StatusCode::kCorruptFile, "runs past the end of the file");
}

TEST(GgufHostile, BadAlignment) {
  expect_error(Writer(3, 0).serialize(), StatusCode::kCorruptFile, "alignment 0 is not");
  expect_error(Writer(3, 3).serialize(), StatusCode::kCorruptFile, "alignment 3 is not");
  expect_error(Writer(3, 48).serialize(), StatusCode::kCorruptFile, "alignment 48 is not");
  Writer w;
  w.set_string("general.alignment", "32");
  expect_error(w.serialize(), StatusCode::kCorruptFile, "expected uint32");
  // A valid alignment with a misaligned tensor offset.
  auto b = small_file(3);
  patch<uint64_t>(&b, tensor_fields(b, "b.weight", 1).offset, 36);
  expect_error(b, StatusCode::kCorruptFile, "not a multiple of the alignment 32");
}

TEST(GgufHostile, DuplicateKeys) {
  Writer w;
  w.set_u32("dup.a", 1);
  w.set_u32("dup.b", 2);
  auto b = w.serialize();
  b[find_bytes(b, "dup.b") + 4] = 'a';
  expect_error(b, StatusCode::kCorruptFile, "duplicate key 'dup.a'");
}

TEST(GgufHostile, DuplicateTensorNames) {
  Writer w;
  ASSERT_TRUE(w.add_tensor("t.a", GgmlType::kF32, {8}, testutil::pattern_bytes(32, 0)).ok());
  ASSERT_TRUE(w.add_tensor("t.b", GgmlType::kF32, {8}, testutil::pattern_bytes(32, 0)).ok());
  auto b = w.serialize();
  b[find_bytes(b, "t.b") + 2] = 'a';
  expect_error(b, StatusCode::kCorruptFile, "duplicate tensor 't.a'");
}

TEST(GgufHostile, UnknownTypes) {
  auto b = small_file(3);
  patch<uint32_t>(&b, tensor_fields(b, "a.weight", 2).type, 77);
  expect_error(b, StatusCode::kUnsupported, "tensor 'a.weight': unknown ggml type id 77");
  b = small_file(3);
  patch<uint32_t>(&b, kv_type_at(b, "test.u8"), 13);
  expect_error(b, StatusCode::kCorruptFile, "key 'test.u8': value type 13");
}

// A file that lies about its dimensions: the data would run past the end of the file.
TEST(GgufHostile, TensorDataPastEnd) {
  auto b = small_file(3);
  patch<uint64_t>(&b, tensor_fields(b, "b.weight", 1).dims, 16);
  expect_error(b, StatusCode::kCorruptFile, "tensor 'b.weight': data [");
  expect_error(b, StatusCode::kCorruptFile,
               ") runs past the end of the file (" + std::to_string(b.size()) + " bytes)");
}

TEST(GgufHostile, OverlappingTensors) {
  auto b = small_file(3);
  patch<uint64_t>(&b, tensor_fields(b, "b.weight", 1).offset, 0);
  expect_error(b, StatusCode::kCorruptFile, "overlaps tensor");
}

TEST(GgufHostile, BadDimensionCount) {
  for (uint32_t n_dims : {0u, 5u, 0xFFFFFFFFu}) {
    auto b = small_file(3);
    patch<uint32_t>(&b, tensor_fields(b, "a.weight", 2).n_dims, n_dims);
    expect_error(b, StatusCode::kCorruptFile, "n_dims " + std::to_string(n_dims));
  }
}

TEST(GgufHostile, NestedArrayDepthBomb) {
  Raw raw(3);
  raw.count(0).count(1).str("bomb").u32(9);
  for (int i = 0; i < 100000; ++i) raw.u32(9).count(1);
  raw.u32(0).count(0);
  expect_error(raw.bytes(), StatusCode::kCorruptFile, "nested more than 8 deep");
}

// Vocabulary arrays of the wrong element type parse, but the typed getter refuses them.
TEST(GgufHostile, VocabularyOfWrongElementType) {
  Writer w;
  w.set_i32_array("tokenizer.ggml.tokens", {1, 2, 3});
  w.set_string_array("tokenizer.ggml.scores", {"a"});
  const auto bytes = w.serialize();
  auto f = parse_bytes(bytes, "vocab.gguf");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_FALSE(tokens.ok());
  EXPECT_EQ(tokens.status().code(), StatusCode::kCorruptFile);
  EXPECT_EQ(tokens.status().message(),
            "vocab.gguf: key 'tokenizer.ggml.tokens' is array of int32, expected array of string");
  EXPECT_FALSE(f->get_f32_array("tokenizer.ggml.scores").ok());
}

}  // namespace
}  // namespace bitnet::gguf
