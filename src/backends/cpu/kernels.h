// Level 1, CPU: the scalar reference kernels (the scalar set, the twin every other set is
// tested against) and the portable kernels every set shares. Each works on a range of rows so
// the backend can split it across threads. See KernelSet for each kernel's contract.
#pragma once

#include <cstdint>
#include <optional>

#include "backends/cpu/kernel_set.h"
#include "backends/cpu/weights.h"
#include "hal/ops.h"

namespace bitnet::cpu {

// dst[i] = dequantized element i of row `row` of w (any dequantizable float format).
void dequantize_row(const CpuWeight& w, int64_t row, float* dst);

// A dot product of n floats, the kernel of matmul_float_by_blocks.
using DotFn = float (*)(const float* a, const float* b, int64_t n);

// matmul_float for any dequantizable type, without allocating: each row is dequantized 256
// elements (or one format block) at a time into a stack buffer and dotted with every token.
void matmul_float_by_blocks(const CpuWeight& w, const float* x, int64_t n_tokens, float* y,
                            int64_t r0, int64_t r1, DotFn dot);

// Weights dotted against quantized activations, as llama.cpp computes them
// (ggml_vec_dot_<type>_<vec_dot_type>): Q4_0 and Q8_0 against Q8_0, Q4_1 against Q8_1, the
// K-quants against Q8_K, ... (quant::vec_dot_type).
struct QuantActFormat {
  GgmlType type;    // Q8_0, Q8_1 or Q8_K
  int64_t block;    // elements per block
  int64_t bytes;    // bytes per block
  void (*quantize_block)(const float* x, uint8_t* dst);  // ggml's reference quantizer
  int64_t row_bytes(int64_t n_cols) const { return n_cols / block * bytes; }
  // One row of n_cols floats (whole blocks) into row_bytes(n_cols) bytes at dst, block by block.
  void quantize_row(const float* x, int64_t n_cols, uint8_t* dst) const {
    for (int64_t b = 0; b < n_cols / block; ++b) quantize_block(x + b * block, dst + b * bytes);
  }
};
// The activation format of `weight_type`'s quantized-activation matmul, if it has one.
std::optional<QuantActFormat> quant_act_format(GgmlType weight_type);
// y[t][r] = dot(w.n_cols, row r of w, act + t * act_row_bytes) for r in [r0, r1), t < n_tokens;
// with a tile (prefill, n_tokens > 1), kQuantTileTokens tokens per call, the rows in blocks
// that stay in L2 while every token tile passes over them.
void matmul_quant_rows(const CpuWeight& w, const uint8_t* act, int64_t act_row_bytes, int64_t n_tokens,
                       float* y, int64_t r0, int64_t r1, QuantDotFn dot, QuantTileFn tile = nullptr);
// The same from float activations: each token's x is quantized into the calling thread's
// scratch (grown once, no allocation per call), then matmul_quant_rows. The backend instead
// quantizes once per op and calls matmul_quant_rows from every thread.
void matmul_quantized_act(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0,
                          int64_t r1, QuantDotFn row_dot);

// Portable rope (every set uses it: its cost is the sines and cosines, computed once per row
// for all heads with llama.cpp's float theta recurrence).
void rope_row(float* x, int32_t n_head, int32_t head_dim, int64_t pos, const hal::RopeParams& p);
// rope_row in two halves: the cosines and sines of position pos's n_rot / 2 angles (rope_row's
// values exactly), and the rotation of a row by them. A step computes each token's angles once
// for the q and k of every layer.
void rope_angles(int64_t pos, const hal::RopeParams& p, float* cos_t, float* sin_t);
void rope_row_angles(float* x, int32_t n_head, int32_t head_dim, const float* cos_t, const float* sin_t,
                     const hal::RopeParams& p);

// dst[i] = fp32_to_fp16(x[i]) (core/fp16.h: round to nearest even, as F16C's vcvtps2ph): the
// rows kStoreKv writes into an F16 KV cache.
void fp32_to_fp16_row(const float* x, int64_t n, uint16_t* dst);

namespace scalar {

float dot_f32(const float* a, const float* b, int64_t n);
void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1);
void matmul_float(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1);
float quantize_act(const float* x, int64_t n_cols, int8_t* q, int32_t* group_sum, int64_t group_sum_stride);
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

}  // namespace scalar

}  // namespace bitnet::cpu
