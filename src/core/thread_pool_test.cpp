#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <atomic>
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

TEST(ThreadPoolDeathTest, SplitRefusesCutsNotOnePerThread) {
  ThreadPool pool(2);
  const std::vector<int64_t> cuts = {0, 10};
  EXPECT_DEATH(pool.parallel_split(cuts, [](int, int64_t, int64_t) {}), "2 cuts for 2 threads");
}

}  // namespace
}  // namespace bitnet
