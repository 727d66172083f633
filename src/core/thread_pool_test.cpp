#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <atomic>
#include <chrono>
#include <thread>
#include <mutex>
#include <numeric>
#include <utility>
#include <vector>

namespace bitnet {
namespace {

TEST(ThreadPool, EveryItemExactlyOnce) {
  for (int n_threads : {1, 2, 4}) {
    ThreadPool pool(n_threads);
    for (int64_t n : {0, 1, 7, 1000, 12345}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, 3, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

// Guided chunks: the first takes 1 / (2 n_threads) of the items, later ones shrink, none is
// smaller than min_chunk but the one holding the last items.
TEST(ThreadPool, ChunksShrinkButNotBelowMinChunk) {
  ThreadPool pool(2);
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  pool.parallel_for(10000, 10, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(m);
    chunks.emplace_back(b, e);
  });
  std::sort(chunks.begin(), chunks.end());
  ASSERT_GE(chunks.size(), 8u);
  EXPECT_EQ(chunks.front(), (std::pair<int64_t, int64_t>{0, 2500}));
  EXPECT_EQ(chunks.back().second, 10000);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].second, chunks[i + 1].first);
    EXPECT_GE(chunks[i].second - chunks[i].first, 10);
    EXPECT_GE(chunks[i].second - chunks[i].first, chunks[i + 1].second - chunks[i + 1].first);
  }
}

TEST(ThreadPool, ManySmallJobsInARow) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 2000; ++job) {
    pool.parallel_for(16, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
  }
  EXPECT_EQ(sum.load(), 2000 * (15 * 16 / 2));
}

// parallel_split: each slot runs exactly its share (empty ones not at all), reports when it was
// done, and a slot that finishes early prefetches what it was given while the others still run
// and between loops.
TEST(ThreadPool, SplitRunsEachShareOnItsSlot) {
  for (int n_threads : {1, 2, 3}) {
    ThreadPool pool(n_threads);
    std::vector<uint8_t> next(64 << 10, 1);
    for (int job = 0; job < 200; ++job) {
      std::vector<int64_t> cuts(static_cast<size_t>(n_threads) + 1);
      for (int s = 0; s <= n_threads; ++s) cuts[static_cast<size_t>(s)] = (job % 7 == 0 && s > 0) ? 100 : 100 * s / n_threads;
      std::vector<ThreadPool::Prefetch> pf(static_cast<size_t>(n_threads), {next.data(), static_cast<int64_t>(next.size())});
      std::vector<int64_t> busy(static_cast<size_t>(n_threads), -1);
      std::vector<std::atomic<int>> hits(100);
      std::vector<std::atomic<int>> slot_of(100);
      pool.parallel_split(cuts, [&](int slot, int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          hits[static_cast<size_t>(i)]++;
          slot_of[static_cast<size_t>(i)] = slot;
        }
      }, pf, busy);
      for (int s = 0; s < n_threads; ++s) {
        for (int64_t i = cuts[static_cast<size_t>(s)]; i < cuts[static_cast<size_t>(s) + 1]; ++i) {
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
          ASSERT_EQ(slot_of[static_cast<size_t>(i)].load(), s) << i;
        }
        EXPECT_GE(busy[static_cast<size_t>(s)], 0) << s;
      }
      // A loop with no prefetch and no times asked for, and an ordinary one, in between.
      pool.parallel_split(cuts, [&](int, int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]--;
      });
      pool.parallel_for(100, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

// parallel_split with a grain: a slot done with its share takes grains from the back of a
// slower one's, every item still runs exactly once, the owner's items stay a prefix of its share,
// and done_items counts what each slot ran.
TEST(ThreadPool, SplitWithAGrainLetsAFreeSlotTakeOverASlowShare) {
  ThreadPool pool(2);
  constexpr int64_t kItems = 200;
  const std::vector<int64_t> cuts = {0, kItems, kItems};  // slot 1's share is empty
  std::vector<std::atomic<int>> hits(kItems);
  std::vector<std::atomic<int>> slot_of(kItems);
  std::vector<int64_t> busy(2, -1), done(2, -1);
  pool.parallel_split(cuts, [&](int slot, int64_t b, int64_t e) {
    EXPECT_LE(e - b, 10);
    for (int64_t i = b; i < e; ++i) {
      hits[static_cast<size_t>(i)]++;
      slot_of[static_cast<size_t>(i)] = slot;
    }
    if (slot == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the slow one
  }, {}, busy, 10, done);
  int64_t prefix = 0;
  while (prefix < kItems && slot_of[static_cast<size_t>(prefix)].load() == 0) ++prefix;
  for (int64_t i = 0; i < kItems; ++i) {
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
    ASSERT_EQ(slot_of[static_cast<size_t>(i)].load(), i < prefix ? 0 : 1) << i;
  }
  EXPECT_GT(done[1], 0) << "the free slot took nothing of a share that sleeps 5 ms per grain";
  EXPECT_EQ(done[0], prefix);
  EXPECT_EQ(done[0] + done[1], kItems);
  EXPECT_GE(prefix, 10) << "the owner starts from the front";
  EXPECT_GE(busy[0], 0);
  EXPECT_GE(busy[1], 0);
}

// Bounds past 32 bits cannot be packed: each share is then one call on its own slot, as with no
// grain (fn touches no memory, so the item numbers can be that large).
TEST(ThreadPool, SplitBeyond32BitsRunsEachShareWhole) {
  ThreadPool pool(2);
  const int64_t big = int64_t{1} << 33;
  const std::vector<int64_t> cuts = {0, big, big + 100};
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> calls[2];
  std::vector<int64_t> done(2, -1);
  pool.parallel_split(cuts, [&](int slot, int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mutex);
    calls[slot].emplace_back(b, e);
  }, {}, {}, 10, done);
  EXPECT_EQ(calls[0], (std::vector<std::pair<int64_t, int64_t>>{{0, big}}));
  EXPECT_EQ(calls[1], (std::vector<std::pair<int64_t, int64_t>>{{big, big + 100}}));
  EXPECT_EQ(done, (std::vector<int64_t>{big, 100}));
}

// Any shares, any grain: every item once, and done_items adds up to them.
TEST(ThreadPool, SplitWithAGrainRunsEveryItemOnce) {
  for (int n_threads : {1, 2, 3}) {
    ThreadPool pool(n_threads);
    for (int job = 0; job < 200; ++job) {
      std::vector<int64_t> cuts(static_cast<size_t>(n_threads) + 1);
      for (int s = 0; s <= n_threads; ++s) cuts[static_cast<size_t>(s)] = (job % 5 == 0 && s > 0) ? 100 : 100 * s / n_threads;
      std::vector<std::atomic<int>> hits(100);
      std::vector<int64_t> done(static_cast<size_t>(n_threads), -1);
      pool.parallel_split(cuts, [&](int, int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      }, {}, {}, 1 + job % 9, done);
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "job " << job;
      EXPECT_EQ(std::accumulate(done.begin(), done.end(), int64_t{0}), 100);
    }
  }
}

TEST(ThreadPoolDeathTest, SplitRefusesCutsNotOnePerThread) {
  ThreadPool pool(2);
  const std::vector<int64_t> cuts = {0, 10};
  EXPECT_DEATH(pool.parallel_split(cuts, [](int, int64_t, int64_t) {}), "2 cuts .* for 2 threads");
}

}  // namespace
}  // namespace bitnet
