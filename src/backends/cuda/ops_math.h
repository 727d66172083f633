// __host__ __device__ arithmetic of the non-GEMV kernels (elementwise.cu, attention.cu), and
// the host half of rope: the per-step cos/sin table. Tested on the host against the CPU's
// scalar kernels (ops_math_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "backends/cuda/w2a8_math.h"  // BITNET_HD

namespace bitnet::cuda {

// Rotation of one rope pair by an angle of cosine c and sine s, as cpu::rope_row (no fused
// multiply-adds: the kernels build with --fmad=false).
BITNET_HD void rope_pair(float& x0, float& x1, float c, float s) {
  const float a = x0, b = x1;
  x0 = a * c - b * s;
  x1 = a * s + b * c;
}

// The cosines and sines of the n_rot / 2 rope pairs of position pos: cos_sin[2i], cos_sin[2i+1]
// for pair i, by the CPU's float recurrence (theta *= theta_scale, cos/sin in float).
inline void rope_cos_sin(int64_t pos, int32_t n_rot, float freq_base, float freq_scale, float* cos_sin) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos) * freq_scale;
  for (int32_t i = 0; i < n_rot / 2; ++i) {
    cos_sin[2 * i] = std::cos(theta);
    cos_sin[2 * i + 1] = std::sin(theta);
    theta *= theta_scale;
  }
}

// Indices of rope pair i (of n_rot / 2) in a head: NEOX (i, i + n_rot/2), NORM (2i, 2i + 1).
BITNET_HD void rope_pair_index(int32_t i, int32_t n_rot, bool neox, int32_t& a, int32_t& b) {
  a = neox ? i : 2 * i;
  b = neox ? i + n_rot / 2 : 2 * i + 1;
}

BITNET_HD float relu2(float a, float b) {
  const float r = a > 0.0f ? a : 0.0f;
  return r * r * b;
}

// silu(a) * b as the CPU writes it (expf on the device: within 2 ulp of the host's).
BITNET_HD float silu_mul_one(float a, float b) { return a / (1.0f + expf(-a)) * b; }

// The cache row of position j of a token (hal::KvMap): table null is the identity.
BITNET_HD int64_t kv_row(int64_t j, const int32_t* table, int32_t block_shift) {
  if (table == nullptr) return j;
  return (static_cast<int64_t>(table[j >> block_shift]) << block_shift) | (j & ((int64_t{1} << block_shift) - 1));
}

// Online softmax over a stream of scores (max m, sum l of exp(score - m)); `o` accumulators are
// rescaled by the returned factor before adding p * v.
struct SoftmaxState {
  float m;
  float l;
};

// Adds `score`: returns the factor for the old accumulators and sets p = exp(score - m_new).
BITNET_HD float softmax_add(SoftmaxState& st, float score, float& p) {
  const float m_new = score > st.m ? score : st.m;
  const float corr = st.m == -INFINITY ? 0.0f : expf(st.m - m_new);
  p = expf(score - m_new);
  st.l = st.l * corr + p;
  st.m = m_new;
  return corr;
}

// Merges b into a: returns the factors (fa, fb) for a's and b's accumulators.
BITNET_HD void softmax_merge(SoftmaxState& a, const SoftmaxState& b, float& fa, float& fb) {
  const float m = a.m > b.m ? a.m : b.m;
  fa = a.m == -INFINITY ? 0.0f : expf(a.m - m);
  fb = b.m == -INFINITY ? 0.0f : expf(b.m - m);
  a.l = a.l * fa + b.l * fb;
  a.m = m;
}

}  // namespace bitnet::cuda
