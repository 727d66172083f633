// The NEON sets' kernels (AArch64), declared without intrinsics so that the sets built on top
// of the baseline one (neon-dotprod, neon-i8mm) can name the kernels they reuse.
// neon:: is baseline Advanced SIMD (kernels_neon*.cpp without extra flags: every AArch64 CPU
// runs it); neon_dotprod:: is compiled with +dotprod, so call it only on a CPU that
// kNeonDotprodKernels.supported() accepts.
#pragma once

#include <cstdint>

#include "backends/cpu/kernel_set.h"

namespace bitnet::cpu::neon {

// Rows per row group of the ternary layout read by every NEON ternary kernel (weights.h): one
// float32x4 of outputs per row group, and two row pairs for SMMLA.
inline constexpr int32_t kTernaryRows = 4;

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1);
float quantize_act(const float* x, int64_t n_cols, int8_t* q, int32_t* group_sum, int64_t group_sum_stride);

void matmul_float(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1);
float dot_f32(const float* a, const float* b, int64_t n);
// KernelSet::quant_dot (kernels_neon_qdot_impl.h via kernels_neon_qdot.cpp).
QuantDotFn quant_dot(GgmlType type);

void rms_norm_row(const float* x, const float* g, int64_t n, float eps, float* dst);
void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos, const KvRowMap& rows,
                    int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                    float* scores, float* out);
void attention_head_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos, const KvRowMap& rows,
                        int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                        float* scores, float* out);
void silu_mul(const float* a, const float* b, int64_t n, float* dst);
void relu2_mul(const float* a, const float* b, int64_t n, float* dst);
void add(const float* a, const float* b, int64_t n, float* dst);
void fp32_to_fp16_row(const float* x, int64_t n, uint16_t* dst);

}  // namespace bitnet::cpu::neon

namespace bitnet::cpu::neon_dotprod {

// The W2A8 matmul on SDOT; neon-i8mm uses it for decode (one token).
void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1);
// KernelSet::quant_dot on SDOT (kernels_neon_dotprod_qdot.cpp); neon-i8mm uses it too.
QuantDotFn quant_dot(GgmlType type);

}  // namespace bitnet::cpu::neon_dotprod
