// Helpers for the GGUF tests: paths into ../shared, a small valid file, byte patching and a
// raw builder for layouts the Writer refuses to produce.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"

namespace bitnet::gguf::testutil {

inline std::string shared_path(std::string_view rel) {
  return std::string(BITNET_SHARED_DIR) + "/" + std::string(rel);
}

// Skips the calling test when a ../shared file is missing.
#define BITNET_REQUIRE_SHARED(path)                                             \
  do {                                                                          \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing test data: " << (path); \
  } while (0)

inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

// A small file with every setter's type and two tensors. The last tensor's size is a multiple
// of 32, so the file ends exactly where its data ends (no trailing padding): every strict
// prefix of it is then invalid.
inline Writer small_writer(uint32_t version) {
  Writer w(version);
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_u8("test.u8", 200);
  w.set_i32("test.i32", -7);
  w.set_u64("test.u64", 1ull << 40);
  w.set_f32("test.f32", 0.5f);
  w.set_bool("test.bool", true);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
  w.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.5f, 2.25f});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 1, 1});
  EXPECT_TRUE(w.add_tensor("a.weight", GgmlType::kF32, {3, 2}, f32_bytes({1, 2, 3, 4, 5, 6})).ok());
  EXPECT_TRUE(w.add_tensor("b.weight", GgmlType::kF32, {8}, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}))
                  .ok());
  return w;
}

inline std::vector<uint8_t> small_file(uint32_t version) { return small_writer(version).serialize(); }

// Offset of the first occurrence of `s` in `b` (the test fails when there is none).
inline size_t find_bytes(const std::vector<uint8_t>& b, std::string_view s) {
  const auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  EXPECT_NE(it, b.end()) << "'" << s << "' not in the file";
  return it == b.end() ? 0 : static_cast<size_t>(it - b.begin());
}

template <class T>
void patch(std::vector<uint8_t>* b, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), b->size());
  std::memcpy(b->data() + at, &v, sizeof(T));
}

// Hand-built GGUF bytes: counts and lengths are uint32 in v1, uint64 otherwise.
class Raw {
 public:
  explicit Raw(uint32_t version = 3) : version_(version) {
    str_bytes("GGUF");
    u32(version);
  }
  Raw& u8(uint8_t v) { return put(v); }
  Raw& u32(uint32_t v) { return put(v); }
  Raw& u64(uint64_t v) { return put(v); }
  Raw& count(uint64_t n) { return version_ == 1 ? u32(static_cast<uint32_t>(n)) : u64(n); }
  Raw& str(std::string_view s) {
    count(s.size());
    return str_bytes(s);
  }
  Raw& str_bytes(std::string_view s) {
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  Raw& pad(size_t align) {
    while (bytes_.size() % align != 0) bytes_.push_back(0);
    return *this;
  }
  Raw& zeros(size_t n) {
    bytes_.resize(bytes_.size() + n, 0);
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  template <class T>
  Raw& put(T v) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &v, sizeof(T));
    return *this;
  }
  uint32_t version_;
  std::vector<uint8_t> bytes_;
};

inline Result<File> parse_bytes(const std::vector<uint8_t>& b, std::string name = "test.gguf") {
  return File::parse(std::span<const uint8_t>(b.data(), b.size()), std::move(name));
}

}  // namespace bitnet::gguf::testutil
