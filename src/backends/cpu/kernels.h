// Level 1, CPU: the scalar reference kernels. Each works on a range of rows so the backend
// can split it across threads; SIMD variants (a later issue) must match these.
#pragma once

#include <cstdint>

#include "backends/cpu/weights.h"
#include "hal/ops.h"

namespace bitnet::cpu {

// dst[i] = dequantized element i of row `row` of w (float formats: F32/F16/BF16/Q8_0).
void dequantize_row(const CpuWeight& w, int64_t row, float* dst);

// y[t][r] = sum_k w[r][k] * x[t][k] for rows r in [r0, r1), tokens t in [0, n_tokens).
// x: [n_tokens][w.n_cols] floats; y: [n_tokens][w.n_rows].
void matmul_float(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0,
                  int64_t r1);

// W2A8: y[t][r] = sum_b (sum_{k in b} code*q[t][k] - sum_{k in b} q[t][k]) * scale_b / s[t].
// q: [n_tokens][w.n_cols] int8; s: [n_tokens] activation scales.
void matmul_ternary(const CpuWeight& w, const int8_t* q, const float* s, int64_t n_tokens,
                    float* y, int64_t r0, int64_t r1);

// One row: dst = x / sqrt(mean(x^2) + eps) * g.
void rms_norm_row(const float* x, const float* g, int64_t n, float eps, float* dst);

// Rotates the n_head heads (head_dim each) of one row at position pos.
void rope_row(float* x, int32_t n_head, int32_t head_dim, int64_t pos, const hal::RopeParams& p);

// Causal attention of one query head over cached positions [0, n_pos).
// k, v: cache rows of n_embd_kv floats; the head reads its kv head's slice at kv_off.
void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos,
                    int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale,
                    float* scores, float* out);

void silu_mul(const float* a, const float* b, int64_t n, float* dst);
void relu2_mul(const float* a, const float* b, int64_t n, float* dst);
void add(const float* a, const float* b, int64_t n, float* dst);

}  // namespace bitnet::cpu
