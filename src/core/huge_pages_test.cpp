#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "core/aligned_vector.h"

namespace bitnet {
namespace {

bool aligned_to(const void* p, std::size_t align) { return reinterpret_cast<std::uintptr_t>(p) % align == 0; }

TEST(HugePages, SmallBlocksKeepTheirAlignment) {
  void* p = allocate_aligned(1000, 64);
  EXPECT_TRUE(aligned_to(p, 64));
  std::memset(p, 0x5a, 1000);
  free_aligned(p, 1000, 64);
}

TEST(HugePages, LargeBlocksAreHugePageAligned) {
  for (std::size_t bytes : {kHugeBlockBytes, kHugeBlockBytes + 12345, 3 * kHugeBlockBytes}) {
    auto* p = static_cast<uint8_t*>(allocate_aligned(bytes, 64));
    EXPECT_TRUE(aligned_to(p, kHugePageBytes)) << bytes;
    // Every byte is usable, the tail past the last whole huge page included.
    for (std::size_t i = 0; i < bytes; i += 4096) p[i] = static_cast<uint8_t>(i >> 12);
    p[bytes - 1] = 0xa5;
    for (std::size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(p[i], static_cast<uint8_t>(i >> 12)) << i;
    EXPECT_EQ(p[bytes - 1], 0xa5);
    free_aligned(p, bytes, 64);
  }
}

// allocate_zeroed: zeros, 64-byte aligned (large blocks on a huge page boundary), every byte
// writable, freed by size; 0 bytes is a null block.
TEST(HugePages, ZeroedBlocksOfEverySize) {
  EXPECT_EQ(allocate_zeroed(0), nullptr);
  free_zeroed(nullptr, 0);
  for (std::size_t bytes : {std::size_t{1}, std::size_t{100000}, kHugeBlockBytes, kHugeBlockBytes + 12345}) {
    auto* p = static_cast<uint8_t*>(allocate_zeroed(bytes));
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_TRUE(aligned_to(p, bytes >= kHugeBlockBytes ? kHugePageBytes : 16)) << bytes;
    for (std::size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(p[i], 0) << i;
    EXPECT_EQ(p[bytes - 1], 0);
    std::memset(p, 0x5a, bytes);
    EXPECT_EQ(p[bytes - 1], 0x5a);
    free_zeroed(p, bytes);
  }
}

TEST(HugePages, AlignedVectorGrowsAcrossTheThreshold) {
  // A vector that grows from a small block into a large one frees each block with the alignment
  // it was allocated with (ASan checks the pairing).
  AlignedVector<uint32_t> v;
  for (uint32_t i = 0; i < (kHugeBlockBytes / sizeof(uint32_t)) * 2; ++i) v.push_back(i);
  EXPECT_TRUE(aligned_to(v.data(), kHugePageBytes));
  EXPECT_EQ(v[12345], 12345u);
  v.resize(10);
  v.shrink_to_fit();
  EXPECT_TRUE(aligned_to(v.data(), 64));
  EXPECT_EQ(v[9], 9u);
}

}  // namespace
}  // namespace bitnet
