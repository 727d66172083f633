#include "backends/cpu/decode_split.h"

#include <gtest/gtest.h>

#include <vector>

namespace bitnet::cpu {
namespace {

std::vector<int64_t> cuts_of(const DecodeSplit& split, size_t key, int64_t n_items) {
  std::vector<int64_t> cuts(static_cast<size_t>(split.n_threads()) + 1);
  split.cuts(key, n_items, cuts);
  return cuts;
}

TEST(DecodeSplit, EvenUntilMeasured) {
  DecodeSplit split(2);
  EXPECT_EQ(cuts_of(split, 3, 100), (std::vector<int64_t>{0, 50, 100}));
  EXPECT_EQ(cuts_of(split, 0, 1), (std::vector<int64_t>{0, 1, 1}));
  DecodeSplit three(3);
  EXPECT_EQ(cuts_of(three, 0, 10), (std::vector<int64_t>{0, 3, 7, 10}));
}

// A thread that took longer for the same items gets fewer: the shares move toward equal
// finishing times, per loop (key), and never past 1.5 times an even share.
TEST(DecodeSplit, ShiftsItemsToTheFasterThread) {
  DecodeSplit split(2);
  const std::vector<int64_t> busy = {1000, 1250};  // thread 1: 0.8x thread 0's rate
  split.record(7, std::vector<int64_t>{500, 500}, busy);
  const std::vector<int64_t> cuts = cuts_of(split, 7, 1000);
  EXPECT_EQ(cuts[1], 556);  // 1 / (1 + 0.8) of the items
  EXPECT_EQ(cuts_of(split, 6, 1000)[1], 500) << "another loop keeps its own rates";
  // Measured again at those shares, both now as fast per item as before: no further change.
  split.record(7, std::vector<int64_t>{556, 444}, std::vector<int64_t>{556 * 2, 444 * 2 * 5 / 4});
  EXPECT_NEAR(static_cast<double>(cuts_of(split, 7, 1000)[1]), 556.0, 1.0);
  // A thread 10x slower: its share stops at half an even one.
  for (int i = 0; i < 100; ++i) split.record(9, std::vector<int64_t>{500, 500}, std::vector<int64_t>{100, 1000});
  EXPECT_EQ(cuts_of(split, 9, 1000)[1], 750);
}

TEST(DecodeSplit, IgnoresEmptySharesAndMissingTimes) {
  DecodeSplit split(2);
  split.record(1, std::vector<int64_t>{10, 0}, std::vector<int64_t>{100, 0});
  EXPECT_EQ(cuts_of(split, 1, 10)[1], 5) << "one thread measured: still even";
}

// A thread that ran more than its share (it took items from the other's) is credited with
// them: the rate is items run over time busy, not the share over it.
TEST(DecodeSplit, CountsTheItemsEachThreadRan) {
  DecodeSplit split(2);
  split.record(2, std::vector<int64_t>{600, 400}, std::vector<int64_t>{1000, 1000});  // shares were 500 each
  EXPECT_EQ(cuts_of(split, 2, 1000)[1], 600);
}

}  // namespace
}  // namespace bitnet::cpu
