// Test helpers for llama.cpp's block formats shared by the GPU backends' tests (header only,
// no library: each backend's test target includes it without linking the other backend).
// Block sizes, dequantized rows, kernel-name helpers, and the reference of the 8-bit
// activation path: the double dot of the dequantized weights with the float activations and
// the activation-quantization bound around it.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "hal/backend.h"
#include "quant/quant.h"

namespace bitnet::backend_test {

// Elements per block: 32 (Q4_0 .. Q8_0, IQ4_NL) or 256 (the K formats, IQ4_XS); also the
// activation block of the CPU's vec_dot for that weight type (Q8_0/Q8_1 or Q8_K).
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

// The activation quantizer of the CPU's vec_dot for weights of type t.
inline const char* q8_quantizer(GgmlType t) {
  if (t == GgmlType::kQ4_1 || t == GgmlType::kQ5_1) return "quantize_q8_1";
  return block_elems(t) == 256 ? "quantize_q8_k" : "quantize_q8_0";
}

// The fp16 min m of 32-element block `block_index` of Q4_1 / Q5_1 bytes (0 for other types).
inline float block_min(GgmlType t, std::span<const uint8_t> bytes, int64_t block_index) {
  if (t != GgmlType::kQ4_1 && t != GgmlType::kQ5_1) return 0.0f;
  const int64_t block_bytes = t == GgmlType::kQ4_1 ? 20 : 24;
  uint16_t h;
  std::memcpy(&h, bytes.data() + block_index * block_bytes + 2, 2);
  return fp16_to_fp32(h);
}

// The reference of y = W x through 8-bit activations: ref[t * n_rows + r] is the double dot
// of dequantized row r (wdq) with activation row x_rows[t], and bound[] the error allowed
// around it: per activation block (32, or 256 for the K formats and IQ4_XS) the quantization
// error |x - q d| <= d (1/2 + 127 * 2^-11) with d = max|x| / 127 (the fp16 rounding of d
// included) times sum |w|; Q4_1/Q5_1 also the fp16 rounding of s = d * sum q times |m|; plus
// float rounding of the per-block steps.
struct Q8Reference {
  std::vector<double> ref, bound;
};

inline Q8Reference q8_reference(GgmlType type, std::span<const uint8_t> wbytes, std::span<const float> wdq,
                                int64_t n_rows, int64_t n_cols, const std::vector<const float*>& x_rows) {
  const int64_t act_block = block_elems(type);
  const auto n_tokens = static_cast<int64_t>(x_rows.size());
  Q8Reference out;
  out.ref.resize(static_cast<size_t>(n_tokens * n_rows));
  out.bound.resize(out.ref.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xr = x_rows[static_cast<size_t>(t)];
    for (int64_t r = 0; r < n_rows; ++r) {
      double sum = 0.0, mag = 0.0, err = 0.0;
      for (int64_t b0 = 0; b0 < n_cols; b0 += act_block) {
        double amax = 0.0, wabs = 0.0;
        for (int64_t k = b0; k < b0 + act_block; ++k) {
          const double wk = wdq[static_cast<size_t>(r * n_cols + k)];
          sum += wk * xr[k];
          mag += std::fabs(wk * xr[k]);
          wabs += std::fabs(wk);
          amax = std::max(amax, static_cast<double>(std::fabs(xr[k])));
        }
        err += amax / 127.0 * (0.5 + 127.0 * 0x1p-11) * wabs;
        const float m = block_min(type, wbytes, (r * n_cols + b0) / 32);
        err += std::fabs(m) * 32.0 * amax * 0x1p-10;  // |s| <= 32 * 127 * d, rounded to fp16
      }
      const auto i = static_cast<size_t>(t * n_rows + r);
      out.ref[i] = sum;
      out.bound[i] = err + static_cast<double>(n_cols / 32 + 16) * 0x1p-23 * (mag + err) + 1e-30;
    }
  }
  return out;
}

// One case of a GPU backend's 8-bit activation matmul test: n_rows x n_cols weights of `type`
// against n_tokens activation rows; `limit` > 0 caps the backend's buffer size (OpenCL's
// allocation, Vulkan's binding) so that the weight is split into row chunks.
struct BlockDotCase {
  GgmlType type;
  int64_t n_rows, n_cols, n_tokens;
  uint64_t limit;  // 0: the device's (no split)
};

inline void PrintTo(const BlockDotCase& c, std::ostream* os) {
  *os << ggml_type_name(c.type) << " " << c.n_rows << "x" << c.n_cols << " t" << c.n_tokens;
}

inline std::string block_dot_case_name(const BlockDotCase& c) {
  return fmt::format("{}_{}x{}_t{}{}", ggml_type_name(c.type), c.n_rows, c.n_cols, c.n_tokens,
                     c.limit > 0 ? "_split" : "");
}

// Every block format with an 8-bit activation path, three cases each: several blocks and 7
// tokens, long rows and 1 token, and `split_rows` rows of `split_k_cols` columns (K formats;
// 160 for the 32-element ones) split into row chunks by a limit a little above the
// activations' (5 tokens of floats).
inline std::vector<BlockDotCase> block_dot_cases(int64_t split_rows, int64_t split_k_cols) {
  constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                                 GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                                 GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS};
  std::vector<BlockDotCase> cases;
  for (GgmlType t : kTypes) {
    const int64_t b = block_elems(t);
    cases.push_back({t, 37, b == 32 ? 96 : 512, 7, 0});
    cases.push_back({t, 3, b == 32 ? 576 : 1024, 1, 0});
    const int64_t n_cols = b == 32 ? 160 : split_k_cols;
    cases.push_back({t, split_rows, n_cols, 5, static_cast<uint64_t>(5 * n_cols * 4 + 1024)});
  }
  return cases;
}

// The inputs of one BlockDotCase: n_input_rows activation rows xs[n_input_rows][n_cols] (row 1
// starts with an all-zero block, so d = 0; row 4 is large, row 7 small) and the float weights
// v[n_rows][n_cols] to quantize. Every weight row leans on one direction, which is input row
// 10: large integer block sums (|sumi| > 2^13) whose products with the scales round, so that
// the order of the float steps shows.
struct BlockDotData {
  std::vector<float> xs, v;
};

inline BlockDotData block_dot_data(std::mt19937& rng, const BlockDotCase& c, int64_t n_input_rows) {
  BlockDotData d;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  d.xs.resize(static_cast<size_t>(n_input_rows * c.n_cols));
  for (float& f : d.xs) f = nd(rng);
  for (int64_t k = 0; k < 256 && k < c.n_cols; ++k) d.xs[static_cast<size_t>(1 * c.n_cols + k)] = 0.0f;
  for (int64_t k = 0; k < c.n_cols; ++k) d.xs[static_cast<size_t>(4 * c.n_cols + k)] *= 300.0f;
  for (int64_t k = 0; k < c.n_cols; ++k) d.xs[static_cast<size_t>(7 * c.n_cols + k)] *= 1e-3f;
  std::normal_distribution<float> wd(0.0f, 0.5f);
  d.v.resize(static_cast<size_t>(c.n_rows * c.n_cols));
  for (float& f : d.v) f = wd(rng);
  std::vector<float> base(static_cast<size_t>(c.n_cols));
  for (float& f : base) f = wd(rng);
  for (size_t i = 0; i < d.v.size(); ++i) d.v[i] = 0.5f * d.v[i] + base[i % base.size()];
  std::copy(base.begin(), base.end(), d.xs.begin() + 10 * c.n_cols);
  return d;
}

// The token ids of a case: token t reads input row (3t + 1) mod n_input_rows.
inline std::vector<int32_t> block_dot_tokens(int64_t n_tokens, int64_t n_input_rows) {
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) tokens[static_cast<size_t>(t)] = static_cast<int32_t>((3 * t + 1) % n_input_rows);
  return tokens;
}

// y = W x for n_tokens rows x of the float table `table` (row of token t), W = `w`
// [n_rows][n_cols]: an embed op then a matmul, y the logits.
inline hal::Graph embed_matmul_graph(int64_t n_tokens, int64_t n_cols, int64_t n_rows, hal::WeightId table,
                                     hal::WeightId w) {
  hal::Graph g;
  g.n_tokens = n_tokens;
  g.acts.push_back({"x", hal::ActType::kF32, n_tokens, n_cols});
  g.acts.push_back({"y", hal::ActType::kF32, n_tokens, n_rows});
  g.ops.push_back({.kind = hal::OpKind::kEmbed, .dst = 0, .w = table});
  g.ops.push_back({.kind = hal::OpKind::kMatmul, .dst = 1, .a = 0, .w = w});
  g.logits = 1;
  return g;
}

// A backend's outputs `got` equal the CPU scalar set's `want` bit for bit (the first 5
// differences reported) and lie within the activation-quantization bound of `ref`.
inline void expect_bits_and_bound(const char* backend, GgmlType type, std::span<const float> got,
                                  std::span<const float> want, const Q8Reference& ref) {
  int64_t mismatches = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) != 0 && mismatches++ < 5) {
      ADD_FAILURE() << ggml_type_name(type) << " output " << i << ": " << backend << " " << fmt::format("{:.9g}", got[i])
                    << " cpu " << fmt::format("{:.9g}", want[i]);
    }
    EXPECT_NEAR(got[i], ref.ref[i], ref.bound[i]) << ggml_type_name(type) << " output " << i;
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace bitnet::backend_test
