// Helpers of the CPU kernel tests: weights built through the real file formats, Q8 rows with
// chosen values, and the kernel sets as test parameters.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernel_set.h"
#include "quant/quant.h"

namespace bitnet::cpu::test {

inline std::vector<uint8_t> random_codes(int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> c(static_cast<size_t>(n));
  for (auto& x : c) x = static_cast<uint8_t>(rng() % 3);
  return c;
}

inline std::vector<float> random_floats(int64_t n, std::mt19937& rng, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// A weight's file bytes and the desc that points at them (the desc's span needs the bytes).
struct FileWeight {
  std::vector<uint8_t> bytes;
  hal::WeightDesc desc() const { return {"w", type, {n_cols, n_rows, 1, 1}, bytes}; }
  GgmlType type = GgmlType::kF32;
  int64_t n_cols = 0;
  int64_t n_rows = 0;
};

// Ternary codes (n_rows x n_cols) with one scale per scale block of the type, as file bytes.
inline FileWeight ternary_file(GgmlType type, const std::vector<uint8_t>& codes, const std::vector<float>& scales,
                               int64_t n_cols, int64_t n_rows) {
  auto bytes = quant::ternary_encode(type, codes.data(), scales.data(), n_cols * n_rows);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return {bytes.ok() ? std::move(*bytes) : std::vector<uint8_t>{}, type, n_cols, n_rows};
}

// Scales exact in fp16 (TQ formats store fp16), one per scale block of `type`.
inline std::vector<float> random_scales(GgmlType type, int64_t n, std::mt19937& rng) {
  std::vector<float> s(static_cast<size_t>(n / quant::ternary_scale_block(type, n)));
  for (auto& x : s) x = 0.0078125f * static_cast<float>(1 + rng() % 64);  // k / 128: exact in fp16
  return s;
}

// Q8 rows of n_tokens random activation rows, quantized by the scalar set.
inline Q8Buffer random_q8(int64_t n_tokens, int64_t n_cols, std::mt19937& rng) {
  Q8Buffer q8;
  q8.resize(n_tokens, n_cols);
  const auto x = random_floats(n_tokens * n_cols, rng);
  for (int64_t t = 0; t < n_tokens; ++t) q8.quantize(kScalarKernels, t, x.data() + t * n_cols);
  return q8;
}

inline CpuWeight prepare(const FileWeight& f, int32_t rows_per_group,
                         TernaryLayout layout = TernaryLayout::k2Bit) {
  auto w = prepare_weight(f.desc(), rows_per_group, nullptr, layout);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  return w.ok() ? std::move(*w) : CpuWeight{};
}

// Q8 rows holding chosen int8 values (any, -128 included) with a chosen scale per token.
struct TestQ8 {
  std::vector<int8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> group_sum;
  int64_t n_tokens = 0;
  int64_t n_cols = 0;
  int64_t stride = 0;

  TestQ8(std::vector<int8_t> values, std::vector<float> scales, int64_t n_tok, int64_t cols)
      : q(std::move(values)), n_tokens(n_tok), n_cols(cols) {
    stride = (n_tokens + kTokenPad - 1) / kTokenPad * kTokenPad;
    scale.assign(static_cast<size_t>(stride), 1.0f);
    std::copy(scales.begin(), scales.end(), scale.begin());
    const int64_t n_groups = (n_cols + kGroupCols - 1) / kGroupCols;
    group_sum.assign(static_cast<size_t>(n_groups * stride), 0);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t k = 0; k < n_cols; ++k) group_sum[static_cast<size_t>(k / kGroupCols * stride + t)] += q[static_cast<size_t>(t * n_cols + k)];
    }
  }
  Q8Rows rows() const { return {q.data(), scale.data(), group_sum.data(), n_tokens, n_cols, stride}; }
};

// The features that choices by microarchitecture read: an x86 CPU of vendor AMD (or not) and
// display family `family` (AMD 0x19: Zen 3-4, 0x1A: Zen 5).
inline CpuFeatures x86_cpu(bool amd, int family) {
  CpuFeatures f;
  f.amd = amd;
  f.family = family;
  return f;
}

inline const KernelSet& set_named(const std::string& name) {
  for (const KernelSet* set : kernel_sets()) {
    if (set->name == name) return *set;
  }
  ADD_FAILURE() << "no kernel set " << name;
  return kScalarKernels;
}

inline std::vector<std::string> set_names() {
  std::vector<std::string> names;
  for (const KernelSet* set : kernel_sets()) names.emplace_back(set->name);
  return names;
}

// Why this CPU cannot run `set` ("" when it can).
inline std::string lacks(const KernelSet& set) {
  std::string why;
  for (std::string_view f : set.missing(detect_cpu_features())) why += (why.empty() ? "" : ", ") + std::string(f);
  return why.empty() ? "" : "this CPU lacks " + why;
}

// A test over every kernel set of the build; a set the CPU cannot run is skipped, naming what
// it lacks.
class EverySet : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (const std::string why = lacks(set()); !why.empty()) GTEST_SKIP() << why;
  }
  const KernelSet& set() const { return set_named(GetParam()); }
};

inline std::string set_param_name(const testing::TestParamInfo<std::string>& p) {
  std::string n = p.param;
  for (char& c : n) c = (c == '-') ? '_' : c;
  return n;
}

}  // namespace bitnet::cpu::test
