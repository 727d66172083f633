#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "gguf/gguf.h"
#include "gguf/test_util.h"

namespace bitnet::gguf {
namespace {

using testutil::parse_bytes;
using testutil::pattern_bytes;
using testutil::shared_path;

// The small file plus one tensor of each ternary-relevant type.
Writer full_writer(uint32_t version, uint64_t alignment = 32) {
  Writer w(version, alignment);
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_u8("test.u8", 200);
  w.set_i32("test.i32", -7);
  w.set_u64("test.u64", 1ull << 40);
  w.set_f32("test.f32", 0.5f);
  w.set_bool("test.bool", false);
  w.set_string("test.empty", "");
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "", "hello world"});
  w.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.5f, 2.25f});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 1, -1});
  w.set_i32_array("test.empty_array", {});
  EXPECT_TRUE(w.add_tensor("f16", GgmlType::kF16, {5, 3}, pattern_bytes(30, 1)).ok());
  EXPECT_TRUE(w.add_tensor("q8", GgmlType::kQ8_0, {64, 2}, pattern_bytes(4 * 34, 2)).ok());
  EXPECT_TRUE(w.add_tensor("tq2", GgmlType::kTQ2_0, {256, 1, 2}, pattern_bytes(2 * 66, 3)).ok());
  EXPECT_TRUE(w.add_tensor("i2s", GgmlType::kI2_S, {128, 2}, pattern_bytes(64 + 32, 4)).ok());
  EXPECT_TRUE(w.add_tensor("f32.4d", GgmlType::kF32, {1, 2, 3, 4}, pattern_bytes(96, 5)).ok());
  return w;
}

void expect_full_contents(const File& f) {
  EXPECT_EQ(*f.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(*f.get_u64("llama.block_count").value(), 2u);
  EXPECT_EQ(f.find("llama.block_count")->type, ValueType::kUint32);
  EXPECT_EQ(f.find("test.u8")->type, ValueType::kUint8);
  EXPECT_EQ(*f.get_u64("test.u8").value(), 200u);
  EXPECT_EQ(*f.get_i64("test.i32").value(), -7);
  EXPECT_EQ(*f.get_u64("test.u64").value(), 1ull << 40);
  EXPECT_EQ(*f.get_f64("test.f32").value(), 0.5);
  EXPECT_EQ(*f.get_bool("test.bool").value(), false);
  EXPECT_EQ(*f.get_string("test.empty").value(), "");
  EXPECT_EQ(**f.get_string_array("tokenizer.ggml.tokens"),
            (std::vector<std::string_view>{"<unk>", "", "hello world"}));
  EXPECT_EQ(**f.get_f32_array("tokenizer.ggml.scores"), (std::vector<float>{0.0f, -1.5f, 2.25f}));
  EXPECT_EQ(**f.get_i32_array("tokenizer.ggml.token_type"), (std::vector<int32_t>{2, 1, -1}));
  EXPECT_TRUE(f.get_i32_array("test.empty_array").value()->empty());

  struct Expected {
    const char* name;
    GgmlType type;
    std::array<int64_t, 4> ne;
    int n_dims;
    size_t n_bytes;
    uint8_t seed;
  };
  const Expected tensors[] = {
      {"f16", GgmlType::kF16, {5, 3, 1, 1}, 2, 30, 1},
      {"q8", GgmlType::kQ8_0, {64, 2, 1, 1}, 2, 4 * 34, 2},
      {"tq2", GgmlType::kTQ2_0, {256, 1, 2, 1}, 3, 2 * 66, 3},
      {"i2s", GgmlType::kI2_S, {128, 2, 1, 1}, 2, 96, 4},
      {"f32.4d", GgmlType::kF32, {1, 2, 3, 4}, 4, 96, 5},
  };
  ASSERT_EQ(f.tensors().size(), std::size(tensors));
  for (size_t i = 0; i < std::size(tensors); ++i) {
    const Expected& e = tensors[i];
    const TensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.name, e.name);
    EXPECT_EQ(t.type, e.type);
    EXPECT_EQ(t.ne, e.ne);
    EXPECT_EQ(t.n_dims, e.n_dims);
    ASSERT_EQ(t.n_bytes, e.n_bytes);
    EXPECT_EQ(t.offset % f.alignment(), 0u);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.n_bytes), pattern_bytes(e.n_bytes, e.seed))
        << e.name;
  }
}

class WriterRoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(WriterRoundTrip, SameMetadataAndTensors) {
  const uint32_t version = GetParam();
  const std::vector<uint8_t> bytes = full_writer(version).serialize();
  auto f = parse_bytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->version(), version);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->find("general.alignment"), nullptr);
  EXPECT_EQ(f->metadata().front().key, "general.architecture");  // insertion order
  EXPECT_EQ(f->metadata().back().key, "test.empty_array");
  expect_full_contents(*f);
}

TEST_P(WriterRoundTrip, Alignment64) {
  const uint32_t version = GetParam();
  const std::vector<uint8_t> bytes = full_writer(version, 64).serialize();
  auto f = parse_bytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->metadata().front().key, "general.alignment");
  EXPECT_EQ(f->find("general.alignment")->type, ValueType::kUint32);
  EXPECT_EQ(bytes.size() % 64, 0u);
  for (const TensorInfo& t : f->tensors()) {
    EXPECT_EQ((t.data - bytes.data()) % 64, 0) << t.name;
  }
  expect_full_contents(*f);
}

INSTANTIATE_TEST_SUITE_P(Versions, WriterRoundTrip, ::testing::Values(1u, 2u, 3u));

TEST(GgufWriter, WriteToDiskAndOpen) {
  const std::string path = ::testing::TempDir() + "gguf_writer_test.gguf";
  ASSERT_TRUE(full_writer(3).write(path).ok());
  auto f = File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->name(), path);
  expect_full_contents(*f);
  std::remove(path.c_str());
  EXPECT_EQ(Writer().write("/nonexistent/dir/x.gguf").code(), StatusCode::kIoError);
}

TEST(GgufWriter, SettingAKeyAgainReplacesItInPlace) {
  Writer w;
  w.set_u32("a", 1);
  w.set_u32("b", 2);
  w.set_string("a", "x");
  const auto bytes = w.serialize();
  auto f = parse_bytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].key, "a");
  EXPECT_EQ(*f->get_string("a").value(), "x");
}

TEST(GgufWriter, RejectsBadTensors) {
  Writer w;
  EXPECT_EQ(w.add_tensor("a", GgmlType::kF32, {4}, pattern_bytes(15, 0)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(w.add_tensor("a", GgmlType::kF32, {4}, pattern_bytes(16, 0)).ok());
  EXPECT_EQ(w.add_tensor("a", GgmlType::kF32, {4}, pattern_bytes(16, 0)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(w.add_tensor("b", GgmlType::kQ8_0, {16, 2}, pattern_bytes(34, 0)).ok());
  EXPECT_FALSE(w.add_tensor("c", GgmlType::kF32, {}, {}).ok());
  EXPECT_FALSE(w.add_tensor("d", GgmlType::kF32, {1, 1, 1, 1, 1}, pattern_bytes(4, 0)).ok());
  EXPECT_FALSE(w.add_tensor("e", GgmlType::kF32, {-1}, {}).ok());
  EXPECT_EQ(w.add_tensor("f", static_cast<GgmlType>(77), {4}, {}).code(), StatusCode::kUnsupported);
  Writer v1(1);
  EXPECT_FALSE(v1.add_tensor("big", GgmlType::kI8, {int64_t{1} << 32, 0}, {}).ok());
}

// Copies a parsed file into a Writer (Writer::set_value); false when it refuses a value.
bool copy_into(const File& f, Writer* w) {
  for (const KeyValue& kv : f.metadata()) {
    if (kv.key == "general.alignment") continue;  // the Writer's constructor writes it
    const Status s = w->set_value(kv.key, kv.value);
    if (!s.ok()) return false;
  }
  for (const TensorInfo& t : f.tensors()) {
    const Status s = w->add_tensor(t.name, t.type, {t.ne.begin(), t.ne.begin() + t.n_dims},
                                   {t.data, t.data + t.n_bytes});
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  return true;
}

// Re-serializing an owner's file reproduces it byte for byte: same key order, same widths,
// same padding (header padded only when tensors follow; every tensor padded to the alignment).
TEST(GgufWriter, ReproducesOwnersFilesByteForByte) {
  const struct {
    const char* rel;
    uint32_t version;
  } files[] = {
      {"golden/llamacpp/tiny-bitnet-f32.gguf", 3},   {"golden/llamacpp/tiny-bitnet-tq1_0.gguf", 3},
      {"golden/llamacpp/tiny-bitnet-tq2_0.gguf", 3}, {"golden/ik_llama/tiny-b158-f32.gguf", 3},
      {"golden/bitnetcpp/tiny-bitnet-i2_s.gguf", 3}, {"golden/tokenizer/ggml-vocab-llama-spm.gguf", 3},
      {"models/stories260K-v1.gguf", 1},
  };
  int compared = 0;
  for (const auto& file : files) {
    const std::string path = shared_path(file.rel);
    if (!std::filesystem::exists(path)) continue;
    SCOPED_TRACE(path);
    auto f = File::open(path);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    ASSERT_EQ(f->version(), file.version);
    Writer w(f->version(), f->alignment());
    ASSERT_TRUE(copy_into(*f, &w));
    const std::vector<uint8_t> out = w.serialize();
    const std::span<const uint8_t> in = f->bytes();
    ASSERT_EQ(out.size(), in.size());
    const auto mismatch = std::mismatch(out.begin(), out.end(), in.begin());
    EXPECT_EQ(mismatch.first, out.end()) << "first differing byte at " << (mismatch.first - out.begin());
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "no files under " << shared_path("");
}

// write_streamed writes the bytes serialize() would, asking for the data of layout-only
// tensors in order; a failing source leaves no file behind and an existing file untouched.
TEST(GgufWriter, StreamedWriteEqualsSerializeAndIsAtomic) {
  Writer w(3);
  w.set_string("general.architecture", "llama");
  ASSERT_TRUE(w.add_tensor("a", GgmlType::kF16, {5, 3}, pattern_bytes(30, 1)).ok());
  ASSERT_TRUE(w.add_tensor_layout("b", GgmlType::kQ8_0, {64, 2}).ok());
  ASSERT_TRUE(w.add_tensor_layout("c", GgmlType::kF32, {3}).ok());
  std::vector<size_t> asked;
  const auto source = [&](size_t i) -> Result<std::vector<uint8_t>> {
    asked.push_back(i);
    return i == 1 ? pattern_bytes(4 * 34, 2) : pattern_bytes(12, 3);
  };
  const std::string path = ::testing::TempDir() + "gguf_writer_streamed.gguf";
  ASSERT_TRUE(w.write_streamed(path, source).ok());
  EXPECT_EQ(asked, (std::vector<size_t>{1, 2}));
  Writer same(3);
  same.set_string("general.architecture", "llama");
  ASSERT_TRUE(same.add_tensor("a", GgmlType::kF16, {5, 3}, pattern_bytes(30, 1)).ok());
  ASSERT_TRUE(same.add_tensor("b", GgmlType::kQ8_0, {64, 2}, pattern_bytes(4 * 34, 2)).ok());
  ASSERT_TRUE(same.add_tensor("c", GgmlType::kF32, {3}, pattern_bytes(12, 3)).ok());
  auto f = File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const std::vector<uint8_t> want = same.serialize();
  EXPECT_TRUE(std::equal(want.begin(), want.end(), f->bytes().begin(), f->bytes().end()));

  // A source that fails, or returns the wrong size: the old file stays, no .part is left.
  const auto failing = [](size_t i) -> Result<std::vector<uint8_t>> {
    if (i == 1) return io_error("disk on fire");
    return pattern_bytes(12, 3);
  };
  EXPECT_EQ(w.write_streamed(path, failing).code(), StatusCode::kIoError);
  const auto short_data = [](size_t) -> Result<std::vector<uint8_t>> { return pattern_bytes(3, 3); };
  EXPECT_EQ(w.write_streamed(path, short_data).code(), StatusCode::kInternal);
  EXPECT_FALSE(std::filesystem::exists(path + ".part"));
  auto again = File::open(path);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), again->bytes().begin(), again->bytes().end()));
  std::remove(path.c_str());
  EXPECT_EQ(w.write_streamed("/nonexistent/dir/x.gguf", source).code(), StatusCode::kIoError);
}

TEST(GgufWriter, SetValueRefusesNestedArrays) {
  Value nested;
  nested.type = ValueType::kArray;
  nested.array_type = ValueType::kArray;
  Writer w;
  EXPECT_EQ(w.set_value("x", nested).code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace bitnet::gguf
