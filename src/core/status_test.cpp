#include "bitnet/status.h"

#include <gtest/gtest.h>

namespace bitnet {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("not positive: " + std::to_string(v));
  return v;
}

Result<int> doubled(int v) {
  BITNET_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

TEST(Status, OkAndErrors) {
  EXPECT_TRUE(Status().ok());
  const Status s = corrupt_file("bad magic").with_context("model.gguf");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruptFile);
  EXPECT_EQ(s.message(), "model.gguf: bad magic");
  EXPECT_EQ(s.to_string(), "corrupt file: model.gguf: bad magic");
}

TEST(Result, PropagatesErrors) {
  auto ok = doubled(4);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "not positive: -1");
}

// Misuse is loud in every build type (the tests run in Release, where asserts are gone).
TEST(ResultDeathTest, ValueOfAnErrorAborts) {
  auto r = parse_positive(-1);
  EXPECT_DEATH((void)r.value(), "value\\(\\) of an error Result.*not positive: -1");
  EXPECT_DEATH((void)*parse_positive(0), "value\\(\\) of an error Result");
  EXPECT_DEATH((void)std::move(r).value(), "value\\(\\) of an error Result");
}

TEST(ResultDeathTest, AnOkStatusCannotMakeAResult) {
  EXPECT_DEATH((void)Result<int>(Status()), "Result made from an ok Status");
}

}  // namespace
}  // namespace bitnet
