// The device memory pool's bookkeeping with a fake allocator: size classes, reuse, peak bytes,
// release, and out of memory.
#include "backends/cuda/device_pool.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

namespace bitnet::cuda {
namespace {

// Hands out fake addresses and counts; refuses allocations past `capacity` bytes.
struct FakeDevice {
  uint64_t capacity = ~uint64_t{0};
  uint64_t used = 0;
  uintptr_t next = 0x1000;
  std::map<void*, uint64_t> live;
  int frees = 0;

  DeviceAllocator allocator() {
    return {[this](uint64_t bytes) -> void* {
              if (used + bytes > capacity) return nullptr;
              used += bytes;
              void* p = reinterpret_cast<void*>(next);
              next += bytes + 256;
              live[p] = bytes;
              return p;
            },
            [this](void* p) {
              auto it = live.find(p);
              ASSERT_NE(it, live.end()) << "free of an unknown block";
              used -= it->second;
              live.erase(it);
              ++frees;
            }};
  }
};

TEST(DevicePool, SizeClassesAreAtLeastTheRequestAndAtMostOneAndAHalfTimesIt) {
  EXPECT_EQ(pool_size_class(0), 256u);
  EXPECT_EQ(pool_size_class(1), 256u);
  EXPECT_EQ(pool_size_class(256), 256u);
  EXPECT_EQ(pool_size_class(257), 384u);
  EXPECT_EQ(pool_size_class(384), 384u);
  EXPECT_EQ(pool_size_class(385), 512u);
  EXPECT_EQ(pool_size_class(1000), 1024u);
  EXPECT_EQ(pool_size_class(3 << 20), 3u << 20);
  for (uint64_t n = 1; n < 100000; n = n * 3 / 2 + 7) {
    const uint64_t c = pool_size_class(n);
    EXPECT_GE(c, n);
    EXPECT_LE(c, std::max<uint64_t>(256, n + n / 2 + 1)) << n;
    EXPECT_EQ(pool_size_class(c), c) << "a class is its own class";
  }
}

TEST(DevicePool, ReusesReleasedBlocksOfTheSameClass) {
  FakeDevice dev;
  DevicePool pool(dev.allocator());
  auto a = pool.acquire(1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->bytes, 1024u);
  void* first = a->ptr;
  pool.release(*a);
  auto b = pool.acquire(900);  // same class (1024)
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->ptr, first);
  auto c = pool.acquire(900);  // the class's list is empty now: a new block
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->ptr, first);
  auto d = pool.acquire(5000);  // another class never takes the 1024 blocks
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(pool.stats().allocations, 3u);
  EXPECT_EQ(pool.stats().reuses, 1u);
  EXPECT_EQ(pool.stats().in_use, 3u);
  EXPECT_EQ(pool.stats().bytes, 1024u + 1024u + 6144u);
  EXPECT_EQ(dev.used, pool.stats().bytes);
}

TEST(DevicePool, SteadyStepsAllocateNothingNew) {
  FakeDevice dev;
  DevicePool pool(dev.allocator());
  const uint64_t sizes[] = {10240, 2560 * 4, 6912 * 4, 100, 128256 * 4};
  for (int step = 0; step < 5; ++step) {
    std::vector<PoolBlock> held;
    for (uint64_t s : sizes) {
      auto b = pool.acquire(s);
      ASSERT_TRUE(b.ok());
      held.push_back(*b);
    }
    for (PoolBlock& b : held) pool.release(b);
  }
  EXPECT_EQ(pool.stats().allocations, 5u);
  EXPECT_EQ(pool.stats().reuses, 20u);
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_EQ(pool.stats().peak_bytes, pool.stats().bytes);
}

TEST(DevicePool, PeakBytesStayAfterClearAndClearFreesOnlyFreeBlocks) {
  FakeDevice dev;
  DevicePool pool(dev.allocator());
  auto a = pool.acquire(4096);
  auto b = pool.acquire(8192);
  ASSERT_TRUE(a.ok() && b.ok());
  pool.release(*a);
  pool.clear();
  EXPECT_EQ(dev.frees, 1);
  EXPECT_EQ(pool.stats().bytes, 8192u);
  EXPECT_EQ(pool.stats().peak_bytes, 4096u + 8192u);
  EXPECT_EQ(dev.live.count(b->ptr), 1u);  // still held by its user
  pool.release(*b);
  pool.release({});  // a null block is ignored
  pool.clear();
  EXPECT_TRUE(dev.live.empty());
  EXPECT_EQ(pool.stats().bytes, 0u);
}

TEST(DevicePool, OutOfMemoryFreesOtherClassesRetriesThenFailsWithOutOfMemory) {
  FakeDevice dev;
  dev.capacity = 16384;
  DevicePool pool(dev.allocator());
  auto a = pool.acquire(8192);
  ASSERT_TRUE(a.ok());
  pool.release(*a);  // free, class 8192
  auto b = pool.acquire(12000);  // class 12288: does not fit beside the free 8192 block
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(dev.frees, 1);
  EXPECT_EQ(pool.stats().bytes, 12288u);
  auto c = pool.acquire(8192);  // nothing free to give back: out of memory
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(c.status().message().find("8192"), std::string::npos) << c.status().message();
  pool.release(*b);
}

TEST(DevicePool, DestructionFreesTheFreeBlocks) {
  FakeDevice dev;
  {
    DevicePool pool(dev.allocator());
    for (uint64_t s : {300, 3000, 30000}) {
      auto b = pool.acquire(s);
      ASSERT_TRUE(b.ok());
      pool.release(*b);
    }
  }
  EXPECT_TRUE(dev.live.empty());
  EXPECT_EQ(dev.frees, 3);
}

}  // namespace
}  // namespace bitnet::cuda
