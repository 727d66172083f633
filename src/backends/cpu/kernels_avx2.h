// The AVX2 set's kernels (x86-64 with AVX2, FMA and F16C), declared without intrinsics so
// that the sets built on top of it (avxvnni, avx512vnni) can name the kernels they reuse.
// Defined in kernels_avx2*.cpp, compiled with -mavx2 -mfma -mf16c; call them only on a CPU
// that kAvx2Kernels.supported() accepts.
#pragma once

#include <cstdint>

#include "backends/cpu/kernel_set.h"

namespace bitnet::cpu::avx2 {

// Rows per row group of the ternary layout read by the x86 ternary kernels (weights.h).
inline constexpr int32_t kTernaryRows = 4;

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1);
float quantize_act(const float* x, int64_t n_cols, int8_t* q, int32_t* group_sum, int64_t group_sum_stride);

void matmul_float(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1);
float dot_f32(const float* a, const float* b, int64_t n);
// KernelSet::quantize_act_row (kernels_avx2_qdot.cpp): Q8_0, Q8_1 and Q8_K activation blocks.
bool quantize_act_row(GgmlType act_type, const float* x, int64_t n, uint8_t* dst);
// KernelSet::quant_dot (kernels_avx2_qdot.cpp).
QuantDotFn quant_dot(GgmlType type);
// KernelSet::quant_tile (kernels_avx2_qdot.cpp): every type quant_dot has SIMD for.
QuantTileFn quant_tile(GgmlType type);

void rms_norm_row(const float* x, const float* g, int64_t n, float eps, float* dst);
void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos, const KvRowMap& rows,
                    int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                    float* scores, float* out);
void attention_head_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos, const KvRowMap& rows,
                        int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                        float* scores, float* out);
void attention_heads(const float* q, int32_t n_q, const float* k_cache, const float* v_cache, int64_t n_pos,
                     const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                     float* scores, float* out);
void attention_heads_f16(const float* q, int32_t n_q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos,
                         const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                         float* scores, float* out);
void attention_heads_part(const float* q, int32_t n_q, const float* k_cache, const float* v_cache, int64_t j_begin,
                          int64_t j_end, const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim,
                          float kq_scale, float* scores, float* out, float* max_out, double* sum_out);
void attention_heads_part_f16(const float* q, int32_t n_q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t j_begin,
                              int64_t j_end, const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim,
                              float kq_scale, float* scores, float* out, float* max_out, double* sum_out);
void silu_mul(const float* a, const float* b, int64_t n, float* dst);
void relu2_mul(const float* a, const float* b, int64_t n, float* dst);
void add(const float* a, const float* b, int64_t n, float* dst);
void fp32_to_fp16_row(const float* x, int64_t n, uint16_t* dst);

}  // namespace bitnet::cpu::avx2

namespace bitnet::cpu::avx512vnni {

// KernelSet::quant_dot of the AVX-512 VNNI set (kernels_avx512vnni_qdot.cpp): its own dots for
// the 32-element formats and Q6_K, the AVX2 set's otherwise.
QuantDotFn quant_dot(GgmlType type);
// KernelSet::quant_tile of the AVX-512 VNNI set: the tiles of its quant_dot.
QuantTileFn quant_tile(GgmlType type);
// KernelSet::q6_K_lanes_dot / q6_K_lanes_tile of the AVX-512 VNNI set: Q6_K in lane order.
QuantDotFn q6_K_lanes_dot();
QuantTileFn q6_K_lanes_tile();
// The AVX-512 VNNI set's attention (kernels_avx512vnni_ops.cpp): the AVX2 set's functions'
// types, 16 lanes wide.
decltype(avx2::attention_head) attention_head;
decltype(avx2::attention_head_f16) attention_head_f16;
decltype(avx2::attention_heads) attention_heads;
decltype(avx2::attention_heads_f16) attention_heads_f16;
decltype(avx2::attention_heads_part) attention_heads_part;
decltype(avx2::attention_heads_part_f16) attention_heads_part_f16;

}  // namespace bitnet::cpu::avx512vnni
