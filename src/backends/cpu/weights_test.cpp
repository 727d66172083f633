// prepare_weight's handling of float weights: large file-backed ones move onto huge pages.
#include "backends/cpu/weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <tuple>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/q6_K_lanes.h"
#include "core/huge_pages.h"
#include "core/mmap_file.h"
#include "core/test_temp_dir.h"
#include "core/thread_pool.h"
#include "quant/q6_k.h"
#include "quant/quant.h"

namespace bitnet::cpu {
namespace {

// A mapped file and its bytes (F16 rows of bytes that differ from page to page, or Q6_K rows).
struct MappedBytes {
  std::vector<uint8_t> bytes;
  MappedFile map;
};

// f.bytes written to a temporary file `name`, mapped as f.map.
void write_and_map(const char* name, MappedBytes& f) {
  const auto path = test::process_temp_dir("bitnet_weights_test_") / name;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(f.bytes.data()),
                                               static_cast<std::streamsize>(f.bytes.size()));
  auto map = MappedFile::open(path.string());
  EXPECT_TRUE(map.ok()) << map.status().message();
  f.map = std::move(*map);
}

MappedBytes write_f16(const char* name, int64_t n_cols, int64_t n_rows) {
  MappedBytes f;
  f.bytes.resize(static_cast<size_t>(n_cols * n_rows * 2));
  for (size_t i = 0; i < f.bytes.size(); ++i) f.bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  write_and_map(name, f);
  return f;
}

hal::WeightDesc desc(const MappedBytes& f, int64_t n_cols, int64_t n_rows, GgmlType type = GgmlType::kF16) {
  hal::WeightDesc d;
  d.name = "head";
  d.type = type;
  d.ne = {n_cols, n_rows, 1, 1};
  d.bytes = f.map.bytes();
  d.file_backed = true;
  return d;
}

TEST(FloatWeights, LargeFileBackedWeightsAreCopiedIntact) {
  const int64_t n_cols = 1280, n_rows = 2048;  // 5 MB: above kHugeBlockBytes
  const MappedBytes f = write_f16("large.bin", n_cols, n_rows);
  auto w = prepare_weight(desc(f, n_cols, n_rows));
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->owned.size(), f.bytes.size());
  EXPECT_EQ(w->raw.data(), w->owned.data());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->raw.data()) % kHugePageBytes, 0u);
  EXPECT_EQ(0, std::memcmp(w->raw.data(), f.bytes.data(), f.bytes.size()));
  EXPECT_EQ(w->resident_bytes(), f.bytes.size());
  EXPECT_EQ(w->read_bytes(), f.bytes.size());
  // The released pages of the mapping read back from the file.
  EXPECT_EQ(0, std::memcmp(f.map.bytes().data(), f.bytes.data(), f.bytes.size()));
}

// Past one 16 MB slice, on a pool: the slices that the threads copy in turn land intact.
TEST(FloatWeights, LargeFileBackedWeightsAreCopiedIntactByThePool) {
  const int64_t n_cols = 2560, n_rows = 7000;  // 35.8 MB: three slices, the last short
  const MappedBytes f = write_f16("large_pool.bin", n_cols, n_rows);
  ThreadPool pool(2);
  auto w = prepare_weight(desc(f, n_cols, n_rows), 1, &pool);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->owned.size(), f.bytes.size());
  EXPECT_EQ(0, std::memcmp(w->raw.data(), f.bytes.data(), f.bytes.size()));
  EXPECT_EQ(0, std::memcmp(f.map.bytes().data(), f.bytes.data(), f.bytes.size()));
}

// Bytes in ordinary memory (a requantized head) are read in place, whatever their size: releasing
// their pages would zero them.
TEST(FloatWeights, LargeWeightsInOrdinaryMemoryAreReadInPlace) {
  const int64_t n_cols = 1280, n_rows = 2048;
  std::vector<uint8_t> bytes(static_cast<size_t>(n_cols * n_rows * 2));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  const std::vector<uint8_t> expected = bytes;
  hal::WeightDesc d;
  d.name = "head";
  d.type = GgmlType::kF16;
  d.ne = {n_cols, n_rows, 1, 1};
  d.bytes = bytes;
  auto w = prepare_weight(d);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_TRUE(w->owned.empty());
  EXPECT_EQ(w->raw.data(), bytes.data());
  EXPECT_EQ(bytes, expected);
}

TEST(FloatWeights, SmallWeightsStayMapped) {
  const int64_t n_cols = 256, n_rows = 64;
  const MappedBytes f = write_f16("small.bin", n_cols, n_rows);
  auto w = prepare_weight(desc(f, n_cols, n_rows));
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_TRUE(w->owned.empty());
  EXPECT_EQ(w->raw.data(), f.map.bytes().data());
  EXPECT_EQ(w->resident_bytes(), 0u);
}

// A mapped file of Q6_K rows quantized from random values.
MappedBytes write_q6_K(const char* name, int64_t n_cols, int64_t n_rows) {
  MappedBytes f;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n_cols * n_rows));
  for (float& v : x) v = normal(rng);
  f.bytes = *quant::quantize(GgmlType::kQ6_K, x.data(), n_rows, n_cols);
  write_and_map(name, f);
  return f;
}

// A Q6_K weight over several of the pool's slices lands in lane order block by block, the slices
// cut between blocks (16 MB is not a multiple of 210 bytes).
TEST(Q6_KWeights, ThePoolCopiesSeveralSlicesInLaneOrder) {
  const int64_t n_cols = 2560, n_rows = 9000;  // 18.9 MB: two slices, the second short
  const MappedBytes f = write_q6_K("large_pool_q6_K.bin", n_cols, n_rows);
  ThreadPool pool(2);
  auto w = prepare_weight(desc(f, n_cols, n_rows, GgmlType::kQ6_K), 1, &pool, TernaryLayout::k2Bit, true);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE(w->q6_K_lanes);
  ASSERT_EQ(w->owned.size(), f.bytes.size());
  constexpr size_t kBlock = quant::kQ6_KBlockBytes;
  uint8_t want[kBlock];
  size_t wrong = 0;
  for (size_t b = 0; b < f.bytes.size(); b += kBlock) {
    q6_K_block_to_lanes(f.bytes.data() + b, want);
    wrong += std::memcmp(want, w->raw.data() + b, kBlock) != 0;
  }
  EXPECT_EQ(wrong, 0u) << "of " << f.bytes.size() / kBlock << " blocks";
}

// Asked for lane order, a large file-backed Q6_K weight (the copy onto huge pages) takes it; a
// small one, one in ordinary memory and a one-row one keep the file's order. Rows read back
// (dequantize_row) as the file's either way.
TEST(Q6_KWeights, LargeFileBackedOnesAreCopiedInLaneOrder) {
  const int64_t n_cols = 512;
  const MappedBytes large = write_q6_K("large_q6_K.bin", n_cols, 12000);  // 5 MB: above kHugeBlockBytes
  const MappedBytes small = write_q6_K("small_q6_K.bin", n_cols, 100);
  const auto desc = [&](const MappedBytes& f, int64_t n_rows, bool file_backed) {
    hal::WeightDesc d;
    d.name = "head";
    d.type = GgmlType::kQ6_K;
    d.ne = {n_cols, n_rows, 1, 1};
    d.bytes = file_backed ? f.map.bytes() : std::span<const uint8_t>(f.bytes);
    d.file_backed = file_backed;
    return d;
  };
  const auto check_rows = [&](const CpuWeight& w, const MappedBytes& f) {
    std::vector<float> got(static_cast<size_t>(n_cols)), want(got.size());
    for (int64_t r : {int64_t{0}, int64_t{1}, w.n_rows - 1}) {
      dequantize_row(w, r, got.data());
      const size_t row_bytes = static_cast<size_t>(w.row_bytes);
      ASSERT_TRUE(quant::dequantize(GgmlType::kQ6_K, {f.bytes.data() + r * row_bytes, row_bytes}, n_cols, want.data()).ok());
      EXPECT_EQ(got, want) << "row " << r;
    }
  };
  auto lanes = prepare_weight(desc(large, 12000, true), 1, nullptr, TernaryLayout::k2Bit, true);
  ASSERT_TRUE(lanes.ok()) << lanes.status().message();
  EXPECT_TRUE(lanes->q6_K_lanes);
  EXPECT_NE(0, std::memcmp(lanes->raw.data(), large.bytes.data(), large.bytes.size()));
  check_rows(*lanes, large);
  auto file_order = prepare_weight(desc(large, 12000, true));
  ASSERT_TRUE(file_order.ok());
  EXPECT_FALSE(file_order->q6_K_lanes);
  EXPECT_EQ(0, std::memcmp(file_order->raw.data(), large.bytes.data(), large.bytes.size()));
  for (const auto& [f, n_rows, file_backed] : {std::tuple{&small, int64_t{100}, true}, std::tuple{&large, int64_t{12000}, false}}) {
    auto w = prepare_weight(desc(*f, n_rows, file_backed), 1, nullptr, TernaryLayout::k2Bit, true);
    ASSERT_TRUE(w.ok());
    EXPECT_FALSE(w->q6_K_lanes) << n_rows << " rows, file-backed " << file_backed;
    check_rows(*w, *f);
  }
}

}  // namespace
}  // namespace bitnet::cpu
