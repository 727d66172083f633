// Helpers shared by the ggml-format tests: inputs, round-trip error, reference dot products.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "core/fp16.h"
#include "quant/q8_0.h"
#include "quant/quant.h"

namespace bitnet::quant::testing {

// Shapes of weights the formats meet: zero-mean normal, uniform, heavy-tailed (u^3), and a
// small spread around an offset (where the min of Q4_1/Q5_1/K formats matters).
enum class Dist { kNormal, kUniform, kHeavyTail, kOffset };
inline constexpr Dist kDists[] = {Dist::kNormal, Dist::kUniform, Dist::kHeavyTail, Dist::kOffset};

inline const char* dist_name(Dist d) {
  switch (d) {
    case Dist::kNormal: return "normal";
    case Dist::kUniform: return "uniform";
    case Dist::kHeavyTail: return "heavy-tail";
    case Dist::kOffset: return "offset";
  }
  return "?";
}

inline std::vector<float> random_floats(int64_t n, Dist dist, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    switch (dist) {
      case Dist::kNormal: v = normal(rng); break;
      case Dist::kUniform: v = uniform(rng); break;
      case Dist::kHeavyTail: {
        const float u = uniform(rng);
        v = u * u * u;
        break;
      }
      case Dist::kOffset: v = 0.5f + 0.02f * normal(rng); break;
    }
  }
  return x;
}

inline std::vector<uint8_t> quantized(GgmlType type, const std::vector<float>& x,
                                      int64_t n_per_row) {
  auto q = quantize(type, x.data(), static_cast<int64_t>(x.size()) / n_per_row, n_per_row);
  EXPECT_TRUE(q.ok()) << q.status().to_string();
  return q.ok() ? *q : std::vector<uint8_t>{};
}

inline std::vector<float> dequantized(GgmlType type, std::span<const uint8_t> bytes, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  const Status s = dequantize(type, bytes, n, y.data());
  EXPECT_TRUE(s.ok()) << s.to_string();
  return y;
}

// sqrt(sum (a - b)^2 / sum b^2).
inline double relative_rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double se = 0.0;
  double ss = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    se += e * e;
    ss += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return std::sqrt(se / ss);
}

// The exact dot product of two float vectors (in double) and the sum of |terms|, the scale of
// the float rounding error any order of summation can make.
struct RefDot {
  double value = 0.0;
  double magnitude = 0.0;
};

inline RefDot ref_dot(const std::vector<float>& a, const std::vector<float>& b) {
  RefDot r;
  for (size_t i = 0; i < a.size(); ++i) {
    const double t = static_cast<double>(a[i]) * static_cast<double>(b[i]);
    r.value += t;
    r.magnitude += std::fabs(t);
  }
  return r;
}

// Q8_1 blocks (n / 32 of them) -> qs * d.
inline std::vector<float> q8_1_dequantized(std::span<const uint8_t> a, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    q8_1_dequantize_block(a.data() + b * kQ8_1BlockBytes, y.data() + b * 32);
  }
  return y;
}

// The Q4_1 / Q5_1 x Q8_1 dot's min term is m * s with s = fp16(d * sum q) made from Q8_1's
// unrounded d, where the dequantized operands give m * fp16(d) * sum q: 2^-10 of |m * s| per
// block covers the two roundings. w_block: the weight block's bytes (Q4_1 20, Q5_1 24; m at 2).
inline double q8_1_s_slack(std::span<const uint8_t> w, std::span<const uint8_t> a, int64_t n,
                           int64_t w_block = 20) {
  double slack = 0.0;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* wb = w.data() + b * w_block;
    const uint8_t* ab = a.data() + b * kQ8_1BlockBytes;
    const float m = fp16_to_fp32(static_cast<uint16_t>(wb[2] | wb[3] << 8));
    const float s = fp16_to_fp32(static_cast<uint16_t>(ab[2] | ab[3] << 8));
    slack += std::fabs(static_cast<double>(m) * s) * 0x1p-10;
  }
  return slack;
}

// The round-trip error bound of a format per input distribution (relative rmse).
struct RoundTripBound {
  GgmlType type;
  double normal, uniform, heavy_tail, offset;
};

// Quantizes and dequantizes 64 blocks of 256 of each distribution, three seeds each, and
// checks the relative rmse against the bound.
inline void expect_round_trip_within(std::span<const RoundTripBound> bounds) {
  for (const RoundTripBound& b : bounds) {
    for (Dist dist : kDists) {
      SCOPED_TRACE(::testing::Message() << ggml_type_name(b.type) << " " << dist_name(dist));
      const double bound = dist == Dist::kNormal      ? b.normal
                           : dist == Dist::kUniform   ? b.uniform
                           : dist == Dist::kHeavyTail ? b.heavy_tail
                                                      : b.offset;
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        const std::vector<float> x = random_floats(256 * 64, dist, seed);
        const std::vector<float> y = dequantized(b.type, quantized(b.type, x, 256), static_cast<int64_t>(x.size()));
        EXPECT_LT(relative_rmse(y, x), bound);
      }
    }
  }
}

// Byte offsets of the fp16 fields (d, and dmin / m where the format has one) in a block of one
// of llama.cpp's block formats (Q8_0, Q4_0 .. Q5_1, Q2_K .. Q6_K, IQ4_NL, IQ4_XS).
inline std::vector<int> fp16_fields(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_1: case GgmlType::kQ5_1: case GgmlType::kQ4_K: case GgmlType::kQ5_K: return {0, 2};
    case GgmlType::kQ2_K: return {80, 82};
    case GgmlType::kQ3_K: return {108};
    case GgmlType::kQ6_K: return {208};
    default: return {0};
  }
}

// n elements of block format t as random bytes (every code and scale bit pattern) with finite
// fp16 fields of random sign and magnitude in [2^-12, 2^-4).
inline std::vector<uint8_t> random_blocks(GgmlType t, int64_t n, std::mt19937& rng) {
  const uint64_t n_bytes = ggml_tensor_n_bytes(t, n).value();
  std::vector<uint8_t> bytes(n_bytes);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const GgmlTypeTraits traits = *ggml_type_traits(static_cast<uint32_t>(t));
  std::uniform_real_distribution<float> mag(-12.0f, -4.0f);
  for (uint64_t off = 0; off < n_bytes; off += traits.block_bytes) {
    for (int f : fp16_fields(t)) {
      const float v = std::exp2(mag(rng)) * (rng() % 2 ? 1.0f : -1.0f);
      const uint16_t h = fp32_to_fp16(v);
      bytes[off + f] = static_cast<uint8_t>(h & 0xff);
      bytes[off + f + 1] = static_cast<uint8_t>(h >> 8);
    }
  }
  return bytes;
}

}  // namespace bitnet::quant::testing
