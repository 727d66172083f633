#include "backends/cuda/kernel_profile.h"

#include <gtest/gtest.h>

namespace bitnet::cuda {
namespace {

TEST(KernelProfile, OneLinePerKernelTheMostTimeFirst) {
  KernelProfile p;
  EXPECT_TRUE(p.empty());
  for (int step = 0; step < 2; ++step) {
    p.add(Kernel::kW2a8Gemv, 30.0);
    p.add(Kernel::kW2a8Gemv, 10.0);
    p.add(Kernel::kAttention, 50.0);
    p.add(Kernel::kNormQuant, 10.0);
    p.add_step();
  }
  EXPECT_FALSE(p.empty());
  const std::string t = p.table();
  const size_t attention = t.find(kernel_name(Kernel::kAttention));
  const size_t gemv = t.find(kernel_name(Kernel::kW2a8Gemv));
  const size_t norm = t.find(kernel_name(Kernel::kNormQuant));
  ASSERT_NE(attention, std::string::npos) << t;
  ASSERT_NE(gemv, std::string::npos) << t;
  ASSERT_NE(norm, std::string::npos) << t;
  EXPECT_LT(attention, gemv);  // 100 us, then 80, then 20
  EXPECT_LT(gemv, norm);
  EXPECT_EQ(t.find(kernel_name(Kernel::kEmbed)), std::string::npos) << "a kernel that never ran";
  // The GEMV: 4 calls, 0.080 ms, 20 us each, 40% of 200 us.
  const std::string gemv_line = t.substr(gemv, t.find('\n', gemv) - gemv);
  EXPECT_NE(gemv_line.find(" 4 "), std::string::npos) << gemv_line;
  EXPECT_NE(gemv_line.find("0.080"), std::string::npos) << gemv_line;
  EXPECT_NE(gemv_line.find("20.00"), std::string::npos) << gemv_line;
  EXPECT_NE(gemv_line.find("40.0%"), std::string::npos) << gemv_line;
  EXPECT_NE(t.find("2 steps, 0.200 ms, 100.0 us per step"), std::string::npos) << t;
}

}  // namespace
}  // namespace bitnet::cuda
