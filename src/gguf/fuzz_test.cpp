// Runs the fuzz target's body (fuzz_entry.h) over deterministic mutations of valid files, so the
// parser is exercised by plain ctest too. Errors are expected; a crash, a sanitizer report or a
// failed BITNET_CHECK is a bug. Each input lives in an allocation of its exact size.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "gguf/fuzz_entry.h"
#include "gguf/gguf.h"
#include "gguf/test_util.h"

namespace bitnet::gguf {
namespace {

// Values that historically break parsers when written over a count, length or offset.
constexpr uint64_t kInteresting[] = {
    0, 1, 2, 3, 4, 5, 7, 8, 13, 31, 32, 33, 63, 64, 255, 256, 4096, 65535, 65536,
    0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF, uint64_t{1} << 32, uint64_t{1} << 40,
    uint64_t{1} << 61, uint64_t{1} << 62, (uint64_t{1} << 62) + 1, uint64_t{1} << 63,
    ~uint64_t{0} - 31, ~uint64_t{0} - 1, ~uint64_t{0},
};

// Offsets of the count and length fields of a file from Writer: header counts, key/name
// lengths, value types, array headers and tensor dims/offsets (found through the names).
std::vector<size_t> field_offsets(const std::vector<uint8_t>& b, uint32_t version,
                                  const std::vector<std::string>& keys,
                                  const std::vector<std::string>& tensors) {
  const size_t len = version == 1 ? 4 : 8;
  std::vector<size_t> out = {8, 8 + len};
  for (const std::string& k : keys) {
    const size_t at = testutil::find_bytes(b, k);
    out.insert(out.end(), {at - len, at + k.size(), at + k.size() + 4, at + k.size() + 8});
  }
  for (const std::string& t : tensors) {
    const auto it = std::find_end(b.begin(), b.end(), t.begin(), t.end());
    const size_t at = static_cast<size_t>(it - b.begin());
    for (size_t k = 0; k < 6; ++k) out.push_back(at + t.size() + 4 * k);
    out.push_back(at - len);
  }
  return out;
}

std::vector<uint8_t> mutate(const std::vector<uint8_t>& base, const std::vector<size_t>& fields,
                            std::mt19937_64& rng) {
  std::vector<uint8_t> b = base;
  const auto pick = [&](uint64_t n) { return static_cast<size_t>(rng() % n); };
  const int n_mutations = 1 + static_cast<int>(rng() % 3);
  for (int m = 0; m < n_mutations && !b.empty(); ++m) {
    switch (rng() % 5) {
      case 0: {  // flip 1..4 bits anywhere
        const int n_flips = 1 + static_cast<int>(rng() % 4);
        for (int i = 0; i < n_flips; ++i) b[pick(b.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      }
      case 1:  // truncate
        b.resize(pick(b.size()));
        break;
      case 2: {  // random byte overwrites
        const size_t at = pick(b.size());
        const size_t n = std::min<size_t>(b.size() - at, 1 + rng() % 8);
        for (size_t i = 0; i < n; ++i) b[at + i] = static_cast<uint8_t>(rng());
        break;
      }
      default: {  // an interesting value over a count / length / type / offset field
        const size_t at = fields[pick(fields.size())];
        const uint64_t v = kInteresting[pick(std::size(kInteresting))];
        const size_t width = (rng() % 2) ? 8 : 4;
        for (size_t i = 0; i < width && at + i < b.size(); ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
        break;
      }
    }
  }
  return b;
}

TEST(GgufFuzz, MutationsOfValidFilesNeverCrash) {
  const std::vector<std::string> keys = {"general.architecture", "llama.block_count", "test.u8",
                                         "test.i32", "test.u64", "test.f32", "test.bool",
                                         "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                         "tokenizer.ggml.token_type"};
  const std::vector<std::string> tensors = {"a.weight", "b.weight"};
  std::mt19937_64 rng(20240521);
  int parsed = 0, total = 0;
  for (uint32_t version : {1u, 2u, 3u}) {
    const std::vector<uint8_t> base = testutil::small_file(version);
    const std::vector<size_t> fields = field_offsets(base, version, keys, tensors);
    for (int i = 0; i < 2000; ++i) {
      const std::vector<uint8_t> input = mutate(base, fields, rng);
      const std::vector<uint8_t> exact(input);  // exact-size heap copy for ASan
      gguf_fuzz_one(exact.data(), exact.size());
      parsed += testutil::parse_bytes(exact).ok() ? 1 : 0;
      ++total;
    }
  }
  // Most mutations must be rejected, and some must survive (bit flips in data and values).
  EXPECT_GT(parsed, total / 100);
  EXPECT_LT(parsed, total);
}

}  // namespace
}  // namespace bitnet::gguf
