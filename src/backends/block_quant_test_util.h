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

}  // namespace bitnet::backend_test
