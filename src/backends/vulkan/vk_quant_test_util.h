// Shared by the block-format tests (vk_quant_test.cpp, vk_quant_dot_test.cpp): a weight table
// that owns its bytes, and small helpers.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "hal/backend.h"
#include "quant/quant.h"

namespace bitnet::vulkan::test {

// A weight table that owns its bytes.
class WeightTable {
 public:
  explicit WeightTable(uint32_t seed) : rng_(seed) {}
  hal::WeightId add_bytes(GgmlType type, int64_t n_rows, int64_t n_cols, std::vector<uint8_t> bytes) {
    storage_.push_back(std::move(bytes));
    hal::WeightDesc d;
    d.name = fmt::format("w{}", descs_.size());
    d.type = type;
    d.ne = {n_cols, n_rows, 1, 1};
    d.bytes = storage_.back();
    descs_.push_back(d);
    return static_cast<hal::WeightId>(descs_.size() - 1);
  }
  hal::WeightId add_float(GgmlType type, int64_t n_rows, int64_t n_cols) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(n_rows * n_cols));
    for (float& f : v) f = nd(rng_);
    return add_bytes(type, n_rows, n_cols, quant::quantize(type, v.data(), n_rows, n_cols).value());
  }
  std::span<const hal::WeightDesc> descs() const { return descs_; }
  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
  std::deque<std::vector<uint8_t>> storage_;
  std::vector<hal::WeightDesc> descs_;
};

inline hal::ActId add_act(hal::Graph& g, std::string_view name, int64_t n_rows, int64_t n_cols) {
  g.acts.push_back({name, hal::ActType::kF32, n_rows, n_cols});
  return static_cast<hal::ActId>(g.acts.size() - 1);
}

inline int64_t block_elems(GgmlType t) {
  switch (t) {
    case GgmlType::kQ8_0: case GgmlType::kQ4_0: case GgmlType::kQ4_1: case GgmlType::kQ5_0: case GgmlType::kQ5_1:
    case GgmlType::kIQ4_NL:
      return 32;
    default:
      return 256;
  }
}

inline std::vector<float> dequantized(GgmlType t, std::span<const uint8_t> bytes, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  const Status s = quant::dequantize(t, bytes, n, y.data());
  EXPECT_TRUE(s.ok()) << s.to_string();
  return y;
}

// The kernel name suffix: "q4_k" for Q4_K.
inline std::string lower_name(GgmlType t) {
  std::string n(ggml_type_name(t));
  for (char& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return n;
}

inline bool uses(const hal::Backend& b, const std::string& kernel) {
  const std::vector<std::string> used = b.kernels_used();
  return std::find(used.begin(), used.end(), kernel) != used.end();
}

inline hal::Graph one_op_graph(int64_t n_tokens) {
  hal::Graph g;
  g.n_tokens = n_tokens;
  return g;
}

}  // namespace bitnet::vulkan::test
