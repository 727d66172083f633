// Against the owners' files in ../shared/golden: llama.cpp wrote tiny-bitnet-{f32,tq2_0,tq1_0}
// and bitnet.cpp wrote tiny-bitnet-i2_s from the same ternary weights. Decoding each ternary
// tensor must give the F32 file's tensor bit for bit, and re-quantizing the F32 tensor with
// our quantizers must give the owner's bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "gguf/gguf.h"
#include "quant/i2s.h"
#include "quant/quant.h"

namespace bitnet::quant {
namespace {

const std::string kGolden = std::string(BITNET_SHARED_DIR) + "/golden/";

std::span<const uint8_t> bytes_of(const gguf::TensorInfo& t) { return {t.data, t.n_bytes}; }

// The F32 tensor's values (copied: mapped bytes carry no float alignment guarantee).
std::vector<float> floats_of(const gguf::TensorInfo& t) {
  std::vector<float> x(static_cast<size_t>(t.n_elems()));
  std::memcpy(x.data(), t.data, x.size() * sizeof(float));
  return x;
}

// Index of the first element whose bits differ, or -1.
int64_t first_bit_difference(std::span<const float> a, std::span<const float> b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]))
      return static_cast<int64_t>(i);
  }
  return -1;
}

class Golden : public ::testing::Test {
 protected:
  // Opens golden/<rel>, or skips the test when the file is not there.
  std::optional<gguf::File> open(const std::string& rel) {
    const std::string path = kGolden + rel;
    if (!std::filesystem::exists(path)) return std::nullopt;
    auto file = gguf::File::open(path);
    EXPECT_TRUE(file.ok()) << file.status().to_string();
    if (!file.ok()) return std::nullopt;
    return std::move(file).value();
  }
};

#define BITNET_OPEN_OR_SKIP(var, rel) \
  auto var = open(rel);               \
  if (!var) GTEST_SKIP() << "missing or unreadable " << kGolden << (rel)

// Decode every ternary tensor of `rel` and compare it with the F32 file, then re-quantize the
// F32 tensor and compare bytes (I2_S: codes and scale; its 28 pad bytes are heap leftovers).
void check_file(const gguf::File& f32, const gguf::File& quantized, GgmlType type) {
  int checked = 0;
  for (const gguf::TensorInfo& t : quantized.tensors()) {
    if (t.type != type) continue;
    SCOPED_TRACE(t.name);
    const gguf::TensorInfo* ref = f32.find_tensor(t.name);
    ASSERT_NE(ref, nullptr);
    ASSERT_EQ(ref->type, GgmlType::kF32);
    ASSERT_EQ(ref->ne, t.ne);
    const int64_t n = t.n_elems();

    const std::vector<float> want = floats_of(*ref);
    std::vector<float> decoded(n);
    ASSERT_TRUE(dequantize(type, bytes_of(t), n, decoded.data()).ok());
    EXPECT_EQ(first_bit_difference(decoded, want), -1);

    std::vector<uint8_t> codes(n);
    std::vector<float> scales(n / ternary_scale_block(type, n));
    ASSERT_TRUE(ternary_decode(type, bytes_of(t), n, codes.data(), scales.data()).ok());
    const int64_t block = ternary_scale_block(type, n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(static_cast<float>(codes[i] - 1) * scales[i / block], want[i]) << i;
    }

    auto requant = quantize(type, want.data(), n / t.ne[0], t.ne[0]);
    ASSERT_TRUE(requant.ok()) << requant.status().to_string();
    ASSERT_EQ(requant->size(), t.n_bytes);
    const size_t compared = type == GgmlType::kI2_S ? static_cast<size_t>(n / 4 + 4) : t.n_bytes;
    EXPECT_EQ(std::memcmp(requant->data(), t.data, compared), 0);
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no " << ggml_type_name(type) << " tensors";
}

TEST_F(Golden, Tq2_0MatchesLlamaCpp) {
  BITNET_OPEN_OR_SKIP(f32, "llamacpp/tiny-bitnet-f32.gguf");
  BITNET_OPEN_OR_SKIP(tq, "llamacpp/tiny-bitnet-tq2_0.gguf");
  check_file(*f32, *tq, GgmlType::kTQ2_0);
}

TEST_F(Golden, Tq1_0MatchesLlamaCpp) {
  BITNET_OPEN_OR_SKIP(f32, "llamacpp/tiny-bitnet-f32.gguf");
  BITNET_OPEN_OR_SKIP(tq, "llamacpp/tiny-bitnet-tq1_0.gguf");
  check_file(*f32, *tq, GgmlType::kTQ1_0);
}

TEST_F(Golden, I2sMatchesBitnetCpp) {
  BITNET_OPEN_OR_SKIP(f32, "llamacpp/tiny-bitnet-f32.gguf");
  BITNET_OPEN_OR_SKIP(i2s, "bitnetcpp/tiny-bitnet-i2_s.gguf");
  check_file(*f32, *i2s, GgmlType::kI2_S);
}

// bitnet.cpp's quantize_i2_s never writes the 28 bytes after the scale: they hold whatever the
// work buffer held (here nonzero). FORMATS.md calls them zero bytes; a reader must ignore them.
TEST_F(Golden, I2sPadBytesAreNotZeroInBitnetCppFiles) {
  BITNET_OPEN_OR_SKIP(i2s, "bitnetcpp/tiny-bitnet-i2_s.gguf");
  int nonzero = 0;
  for (const gguf::TensorInfo& t : i2s->tensors()) {
    if (t.type != GgmlType::kI2_S) continue;
    const uint8_t* pad = t.data + t.n_elems() / 4 + 4;
    for (int i = 0; i < 28; ++i) nonzero += pad[i] != 0;
  }
  EXPECT_GT(nonzero, 0);
}

// bitnet.cpp stored the embedding as F16: it must be exactly fp16(x) of the F32 file's.
TEST_F(Golden, I2sFileF16EmbeddingIsFp16OfF32) {
  BITNET_OPEN_OR_SKIP(f32, "llamacpp/tiny-bitnet-f32.gguf");
  BITNET_OPEN_OR_SKIP(i2s, "bitnetcpp/tiny-bitnet-i2_s.gguf");
  const gguf::TensorInfo* emb = i2s->find_tensor("token_embd.weight");
  const gguf::TensorInfo* ref = f32->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  ASSERT_NE(ref, nullptr);
  ASSERT_EQ(emb->type, GgmlType::kF16);
  ASSERT_EQ(ref->n_elems(), emb->n_elems());
  const int64_t n = emb->n_elems();
  std::vector<float> decoded(n);
  ASSERT_TRUE(dequantize(GgmlType::kF16, bytes_of(*emb), n, decoded.data()).ok());
  const std::vector<float> x = floats_of(*ref);
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
  EXPECT_EQ(first_bit_difference(decoded, want), -1);
  auto requant = quantize(GgmlType::kF16, x.data(), n / ref->ne[0], ref->ne[0]);
  ASSERT_TRUE(requant.ok());
  EXPECT_TRUE(std::equal(requant->begin(), requant->end(), emb->data, emb->data + emb->n_bytes));
}

// The owners' I2_S and TQ2_0 bytes of the same tensor convert into each other exactly.
TEST_F(Golden, I2sAndTq2_0FilesConvertIntoEachOther) {
  BITNET_OPEN_OR_SKIP(i2s, "bitnetcpp/tiny-bitnet-i2_s.gguf");
  BITNET_OPEN_OR_SKIP(tq, "llamacpp/tiny-bitnet-tq2_0.gguf");
  int checked = 0;
  for (const gguf::TensorInfo& t : i2s->tensors()) {
    if (t.type != GgmlType::kI2_S) continue;
    SCOPED_TRACE(t.name);
    const gguf::TensorInfo* other = tq->find_tensor(t.name);
    ASSERT_NE(other, nullptr);
    ASSERT_EQ(other->type, GgmlType::kTQ2_0);
    const int64_t n = t.n_elems();
    auto to_tq = i2s_to_tq2_0(bytes_of(t), n);
    ASSERT_TRUE(to_tq.ok()) << to_tq.status().to_string();
    EXPECT_TRUE(
        std::equal(to_tq->begin(), to_tq->end(), other->data, other->data + other->n_bytes));
    auto to_i2s = tq2_0_to_i2s(bytes_of(*other), n);
    ASSERT_TRUE(to_i2s.ok()) << to_i2s.status().to_string();
    EXPECT_EQ(std::memcmp(to_i2s->data(), t.data, static_cast<size_t>(n / 4 + 4)), 0);
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace bitnet::quant
