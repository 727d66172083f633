// The graph cache's order and bound: the most recently used first, the least recently used
// pushed out past the capacity and handed back to be freed.
#include "backends/cuda/graph_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace bitnet::cuda {
namespace {

struct Entry {
  std::string signature;
};

std::unique_ptr<Entry> entry(std::string s) { return std::make_unique<Entry>(Entry{std::move(s)}); }

TEST(GraphCache, KeepsTheMostRecentlyUsedUpToItsCapacity) {
  GraphCache<Entry> c(3);
  EXPECT_EQ(c.find("a"), nullptr);
  EXPECT_EQ(c.insert(entry("a")), nullptr);
  EXPECT_EQ(c.insert(entry("b")), nullptr);
  EXPECT_EQ(c.insert(entry("c")), nullptr);
  ASSERT_NE(c.find("a"), nullptr);  // a is now the most recent: b is the oldest
  EXPECT_EQ(c.find("a")->signature, "a");
  const auto out = c.insert(entry("d"));
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->signature, "b");
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.find("b"), nullptr);
  EXPECT_NE(c.find("c"), nullptr);
  const auto gone = c.remove("c");
  ASSERT_NE(gone, nullptr);
  EXPECT_EQ(c.remove("c"), nullptr);
  EXPECT_EQ(c.size(), 2u);
  const auto all = c.take_all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]->signature, "d");  // inserted last, never looked up since
  EXPECT_EQ(all[1]->signature, "a");
  EXPECT_EQ(c.size(), 0u);
}

TEST(GraphCache, CapacityOneReplacesOnEachInsert) {
  GraphCache<Entry> c(0);  // taken as 1
  EXPECT_EQ(c.capacity(), 1u);
  EXPECT_EQ(c.insert(entry("a")), nullptr);
  EXPECT_EQ(c.insert(entry("b"))->signature, "a");
}

}  // namespace
}  // namespace bitnet::cuda
