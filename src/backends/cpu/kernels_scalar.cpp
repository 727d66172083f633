// Scalar reference kernels of the CPU backend. Loops are written so that the compiler can
// vectorize them (8 independent accumulators, byte-sliced ternary groups), but no intrinsics.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/check.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace bitnet::cpu {

namespace {

float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// All 65536 halves as floats (256 KiB, built once, read-only): a table lookup is several times
// faster than converting bit by bit, and the F16 output head is a large part of each token.
const float* fp16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = fp16_to_fp32(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

}  // namespace

void dequantize_row(const CpuWeight& w, int64_t row, float* dst) {
  const uint8_t* src = w.raw.data() + row * w.row_bytes;
  switch (w.type) {
    case GgmlType::kF32:
      std::copy_n(reinterpret_cast<const float*>(src), w.n_cols, dst);
      return;
    case GgmlType::kF16: {
      const float* table = fp16_table();
      for (int64_t i = 0; i < w.n_cols; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = table[h];
      }
      return;
    }
    case GgmlType::kBF16:
      for (int64_t i = 0; i < w.n_cols; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = bf16_to_fp32(h);
      }
      return;
    default: {
      const Status s = quant::dequantize(w.type, {src, static_cast<size_t>(w.row_bytes)}, w.n_cols, dst);
      BITNET_CHECK(s.ok());  // sizes were validated when the weight was prepared
    }
  }
}

void matmul_float(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0,
                  int64_t r1) {
  const int64_t n = w.n_cols;
  std::vector<float> scratch(w.type == GgmlType::kF32 ? 0 : static_cast<size_t>(n));
  for (int64_t r = r0; r < r1; ++r) {
    const float* row;
    if (w.type == GgmlType::kF32) {
      row = reinterpret_cast<const float*>(w.raw.data() + r * w.row_bytes);
    } else {
      dequantize_row(w, r, scratch.data());
      row = scratch.data();
    }
    for (int64_t t = 0; t < n_tokens; ++t) y[t * w.n_rows + r] = dot_f32(row, x + t * n, n);
  }
}

void matmul_ternary(const CpuWeight& w, const int8_t* q, const float* s, int64_t n_tokens,
                    float* y, int64_t r0, int64_t r1) {
  const int64_t n = w.n_cols;
  const int64_t block = w.ternary.scale_block;
  const int64_t n_blocks = n / block;
  // sum q over each scale block of each token: the "- act_sum" term, shared by every row.
  std::vector<int32_t> qsum(static_cast<size_t>(n_tokens * n_blocks), 0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t k = 0; k < n; ++k) qsum[static_cast<size_t>(t * n_blocks + k / block)] += q[t * n + k];
  }
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.ternary.packed.data() + r * (n / 4);
    const float* scales = w.ternary.scales.data() + r * n_blocks;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const int8_t* qt = q + t * n;
      float acc = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        int32_t dot = 0;  // sum code*q over the block
        for (int64_t g = b * block; g < (b + 1) * block; g += 128) {
          const uint8_t* bytes = row + g / 4;
          const int8_t* qg = qt + g;
          // Four products of |code*q| <= 256 per lane fit 16 bits; widen once per group
          // (bitnet.cpp's AVX2 kernel sums 4096 products in 16 bits and can overflow).
          int16_t lane[32];
          for (int j = 0; j < 32; ++j) {
            const int c = bytes[j];
            lane[j] = static_cast<int16_t>((c >> 6) * qg[j] + ((c >> 4) & 3) * qg[j + 32] +
                                           ((c >> 2) & 3) * qg[j + 64] + (c & 3) * qg[j + 96]);
          }
          for (int j = 0; j < 32; ++j) dot += lane[j];
        }
        // FORMATS.md: y = (sum code*q - act_sum) / s * w_scale.
        acc += static_cast<float>(dot - qsum[static_cast<size_t>(t * n_blocks + b)]) / s[t] * scales[b];
      }
      y[t * w.n_rows + r] = acc;
    }
  }
}

void rms_norm_row(const float* x, const float* g, int64_t n, float eps, float* dst) {
  double sum = 0.0;  // as ggml: accumulate squares in double
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) dst[i] = x[i] * scale * g[i];
}

void rope_row(float* x, int32_t n_head, int32_t head_dim, int64_t pos, const hal::RopeParams& p) {
  const int32_t n_rot = p.n_rot;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(n_rot));
  for (int32_t h = 0; h < n_head; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    float theta = static_cast<float>(pos) * p.freq_scale;
    for (int32_t i0 = 0; i0 < n_rot; i0 += 2) {
      const float cos_t = std::cos(theta);
      const float sin_t = std::sin(theta);
      // NORM rotates (x[i0], x[i0+1]); NEOX rotates (x[i0/2], x[i0/2 + n_rot/2]).
      const int32_t a = p.style == hal::RopeStyle::kNorm ? i0 : i0 / 2;
      const int32_t b = p.style == hal::RopeStyle::kNorm ? i0 + 1 : i0 / 2 + n_rot / 2;
      const float x0 = v[a];
      const float x1 = v[b];
      v[a] = x0 * cos_t - x1 * sin_t;
      v[b] = x0 * sin_t + x1 * cos_t;
      theta *= theta_scale;
    }
  }
}

void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos,
                    int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale,
                    float* scores, float* out) {
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n_pos; ++j) {
    scores[j] = dot_f32(q, k_cache + j * n_embd_kv + kv_off, head_dim) * kq_scale;
    max_score = std::max(max_score, scores[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n_pos; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  std::fill_n(out, head_dim, 0.0f);
  for (int64_t j = 0; j < n_pos; ++j) {
    const float p = scores[j] * inv_sum;
    const float* v = v_cache + j * n_embd_kv + kv_off;
    for (int32_t d = 0; d < head_dim; ++d) out[d] += p * v[d];
  }
}

void silu_mul(const float* a, const float* b, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
}

void relu2_mul(const float* a, const float* b, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = std::max(a[i], 0.0f);
    dst[i] = r * r * b[i];
  }
}

void add(const float* a, const float* b, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

}  // namespace bitnet::cpu
