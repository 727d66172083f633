#include "quant/k_quant_util.h"

#include <algorithm>
#include <cmath>

namespace bitnet::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS

}  // namespace

float max_by_magnitude(const float* x, int64_t n, float* amax) {
  float max = 0.0f;
  *amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > *amax) {
      *amax = ax;
      max = x[i];
    }
  }
  return max;
}

// On x86-64 also built for AVX2 (chosen at run time): the 18 candidates' lanes twice as wide.
// Contraction stays off (-ffp-contract=off), so both builds give ggml's bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0.0f;
  const float max = max_by_magnitude(x, n, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const auto level = [nmax](float v) { return std::clamp(nearest_int(v), -nmax, nmax - 1); };
  const auto fnmax = static_cast<float>(nmax);

  // First guess: max maps to -nmax. Weighted least squares of x ~ scale * l with w = x^2.
  float iscale = -fnmax / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale * x[i]);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const auto fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;

  // Nearby inverse scales -(nmax + 0.1 is) / max, is = -9 .. 9 but 0; keep one that explains
  // more of x. Each candidate's sums run in its own slot, element after element in ggml's
  // order (the same float steps as one candidate at a time), so the compiler runs the 18 side
  // by side in vector lanes; then the choice goes through them in ggml's order of is.
  constexpr int kCandidates = 18;
  float cand_iscale[kCandidates];
  float cand_lx[kCandidates] = {};
  float cand_l2[kCandidates] = {};
  for (int k = 0; k < kCandidates; ++k) {
    const int is = k < 9 ? k - 9 : k - 8;
    cand_iscale[k] = -(fnmax + 0.1f * static_cast<float>(is)) / max;
  }
  for (int i = 0; i < n; ++i) {
    const float w = x[i] * x[i];
    const float wx = w * x[i];
    for (int k = 0; k < kCandidates; ++k) {
      const auto fl = static_cast<float>(level(cand_iscale[k] * x[i]));
      cand_lx[k] += wx * fl;
      cand_l2[k] += w * fl * fl;
    }
  }
  int chosen = -1;
  for (int k = 0; k < kCandidates; ++k) {
    if (cand_l2[k] > 0.0f && cand_lx[k] * cand_lx[k] > best * cand_l2[k]) {
      chosen = k;
      scale = cand_lx[k] / cand_l2[k];
      best = scale * cand_lx[k];
    }
  }
  if (chosen >= 0) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + level(cand_iscale[chosen] * x[i]));
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0.0f;
  const float max = max_by_magnitude(x, n, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const auto level = [nmax](float v) { return std::clamp(nearest_int(v), -nmax, nmax - 1); };
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale * x[i]);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const auto li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0.0f) {
        float sl2 = suml2 - w * li * li;
        const int new_l = level(x[i] * sl2 / slx);
        if (new_l != L[i]) {
          const auto fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sumlx / suml2;
}

float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0.0f) min = 0.0f;  // the offset only ever subtracts
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.0f;
  }
  const auto fnmax = static_cast<float>(nmax);
  const auto level = [nmax](float v) { return std::clamp(nearest_int(v), 0, nmax); };
  const auto error = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };

  // First guess: [min, max] spread over [0, nmax].
  float iscale = fnmax / (max - min);
  float scale = 1.0f / iscale;
  float best_mad = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(level(iscale * (x[i] - min)));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_mad += weights[i] * error(diff);
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }

  // For each trial inverse scale, the weighted least-squares scale and offset of x ~ s * l + m
  // (offset clamped to <= 0); keep the levels with the least error.
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + fnmax) / (max - min);
    float sum_l = 0.0f;
    float sum_l2 = 0.0f;
    float sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale * (x[i] - min));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const auto fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float mad = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        mad += weights[i] * error(diff);
      }
      if (mad < best_mad) {
        std::copy(Laux, Laux + n, L);
        best_mad = mad;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

void pack_scale_min_k4(const uint8_t* ls, const uint8_t* lm, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = ls[j];
    q[j + 4] = lm[j];
  }
  for (int j = 4; j < 8; ++j) {
    q[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
    q[j - 4] = static_cast<uint8_t>(q[j - 4] | ((ls[j] >> 4) << 6));
    q[j] = static_cast<uint8_t>(q[j] | ((lm[j] >> 4) << 6));
  }
}

}  // namespace bitnet::quant
