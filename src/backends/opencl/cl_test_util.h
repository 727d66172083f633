// Test helpers of the OpenCL backend: weight tables with random inputs, single-op graphs and
// the comparison of the OpenCL backend's output with the CPU backend's.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/opencl/cl_options.h"
#include "hal/backend.h"
#include "quant/quant.h"

namespace bitnet::opencl::test {

// Declares `var` (std::unique_ptr<hal::Backend>) on the OpenCL device, or skips the test
// when this machine has no OpenCL platform or device.
#define BITNET_CL_BACKEND_OR_SKIP(var, options)                                                  \
  auto var##_result = ::bitnet::opencl::make_backend(options);                                   \
  if (!var##_result.ok() && var##_result.status().code() == ::bitnet::StatusCode::kUnavailable) { \
    GTEST_SKIP() << "no OpenCL device: " << var##_result.status().message();                     \
  }                                                                                              \
  ASSERT_TRUE(var##_result.ok()) << var##_result.status().to_string();                           \
  std::unique_ptr<::bitnet::hal::Backend> var = std::move(var##_result).value()

// A weight table whose bytes it owns.
class WeightTable {
 public:
  explicit WeightTable(uint32_t seed = 1) : rng_(seed) {}

  // n_rows x n_cols of N(0, sd) floats stored as `type` (F32/F16/BF16/Q8_0), via the owners'
  // reference quantizers. A {n_cols} (1-D) tensor when n_rows == 0.
  hal::WeightId add_float(GgmlType type, int64_t n_rows, int64_t n_cols, float sd = 1.0f) {
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> v(static_cast<size_t>(std::max<int64_t>(n_rows, 1) * n_cols));
    for (float& x : v) x = d(rng_);
    return add_values(type, n_rows, n_cols, v);
  }
  hal::WeightId add_values(GgmlType type, int64_t n_rows, int64_t n_cols, const std::vector<float>& v) {
    auto bytes = quant::quantize(type, v.data(), std::max<int64_t>(n_rows, 1), n_cols);
    EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
    return add_bytes(type, n_rows, n_cols, std::move(bytes).value());
  }
  // Random codes; scales as exact fp16 values (TQ) or one per tensor (I2_S).
  hal::WeightId add_ternary(GgmlType type, int64_t n_rows, int64_t n_cols) {
    std::vector<uint8_t> codes(static_cast<size_t>(n_rows * n_cols));
    for (uint8_t& c : codes) c = static_cast<uint8_t>(rng_() % 3);
    return add_codes(type, n_rows, n_cols, codes);
  }
  hal::WeightId add_codes(GgmlType type, int64_t n_rows, int64_t n_cols, const std::vector<uint8_t>& codes,
                          float fixed_scale = 0.0f) {
    const int64_t n = n_rows * n_cols;
    std::vector<float> scales(static_cast<size_t>(n / quant::ternary_scale_block(type, n)));
    for (float& s : scales) s = fixed_scale > 0 ? fixed_scale : 0.125f + static_cast<float>(rng_() % 64) / 64.0f;
    auto bytes = quant::ternary_encode(type, codes.data(), scales.data(), n);
    EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
    return add_bytes(type, n_rows, n_cols, std::move(bytes).value());
  }
  hal::WeightId add_bytes(GgmlType type, int64_t n_rows, int64_t n_cols, std::vector<uint8_t> bytes) {
    storage_.push_back(std::move(bytes));
    hal::WeightDesc d;
    d.name = fmt::format("w{}", descs_.size());
    d.type = type;
    d.ne = {n_cols, std::max<int64_t>(n_rows, 1), 1, 1};
    d.bytes = storage_.back();
    descs_.push_back(d);
    return static_cast<hal::WeightId>(descs_.size() - 1);
  }

  std::span<const hal::WeightDesc> descs() const { return descs_; }
  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
  std::deque<std::vector<uint8_t>> storage_;
  std::vector<hal::WeightDesc> descs_;
};

inline hal::ActId add_act(hal::Graph& g, std::string_view name, int64_t n_rows, int64_t n_cols,
                          hal::ActType type = hal::ActType::kF32) {
  g.acts.push_back({name, type, n_rows, n_cols});
  return static_cast<hal::ActId>(g.acts.size() - 1);
}

// One step of a test: a graph and its tokens.
struct Step {
  hal::Graph graph;
  std::vector<int32_t> tokens;
};

// max |a - b| <= atol + rtol * |b| element-wise (b: the CPU's), with the worst index reported.
inline void expect_close(std::span<const float> cl, std::span<const float> cpu, double rtol, double atol,
                         const std::string& what) {
  ASSERT_EQ(cl.size(), cpu.size());
  double worst = 0.0;
  size_t worst_i = 0;
  for (size_t i = 0; i < cl.size(); ++i) {
    const double excess = std::fabs(double{cl[i]} - cpu[i]) - (atol + rtol * std::fabs(double{cpu[i]}));
    if (excess > worst || std::isnan(cl[i]) != std::isnan(cpu[i])) {
      worst = std::isnan(excess) ? 1e30 : excess;
      worst_i = i;
    }
  }
  EXPECT_LE(worst, 0.0) << what << ": element " << worst_i << " opencl " << cl[worst_i] << " cpu " << cpu[worst_i];
}

// Runs the steps on `cl` and on the CPU backend (same weights, same KV shape) and compares
// every step's output.
inline void compare_with_cpu(hal::Backend& cl, const WeightTable& table, const hal::KvShape& kv,
                             const std::vector<Step>& steps, double rtol, double atol, const std::string& what) {
  auto cpu = cpu::make_cpu_backend({1, "scalar"});
  ASSERT_TRUE(cpu->load_weights(table.descs()).ok());
  ASSERT_TRUE(cpu->init_kv(kv).ok());
  const Status loaded = cl.load_weights(table.descs());
  ASSERT_TRUE(loaded.ok()) << loaded.to_string();
  const Status kv_ok = cl.init_kv(kv);
  ASSERT_TRUE(kv_ok.ok()) << kv_ok.to_string();
  for (size_t i = 0; i < steps.size(); ++i) {
    const hal::Graph& g = steps[i].graph;
    const hal::ActDesc& out = g.acts[static_cast<size_t>(g.logits)];
    std::vector<float> y_cpu(static_cast<size_t>(out.n_rows * out.n_cols));
    std::vector<float> y_cl(y_cpu.size(), -12345.0f);
    const Status s_cpu = cpu->compute(g, steps[i].tokens, y_cpu);
    ASSERT_TRUE(s_cpu.ok()) << s_cpu.to_string();
    const Status s_cl = cl.compute(g, steps[i].tokens, y_cl);
    ASSERT_TRUE(s_cl.ok()) << s_cl.to_string();
    expect_close(y_cl, y_cpu, rtol, atol, fmt::format("{} step {}", what, i));
  }
}

}  // namespace bitnet::opencl::test
