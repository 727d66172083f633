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

#include "backends/block_quant_test_util.h"
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

// Block sizes, dequantized rows and kernel-name helpers shared with the OpenCL tests.
using backend_test::block_elems;
using backend_test::dequantized;
using backend_test::lower_name;
using backend_test::uses;

inline hal::Graph one_op_graph(int64_t n_tokens) {
  hal::Graph g;
  g.n_tokens = n_tokens;
  return g;
}

}  // namespace bitnet::vulkan::test
