#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
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

}  // namespace
}  // namespace bitnet
