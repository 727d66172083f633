// Weight formats: scalar reference encode/decode, bit-exact with the formats' owners
// (ggml for Q4_0..Q8_1, the K quants and TQ1_0/TQ2_0, bitnet.cpp for I2_S). Kernels of every
// backend are checked against these. Layouts are recorded in the per-format headers (q4_q5.h,
// q8_0.h, q2_k_q3_k.h, q4_k_q5_k.h, q6_k.h, q8_k.h, iq4.h, tq1_0.h, tq2_0.h, i2s.h).
//
// Ternary "codes" are w + 1 in {0, 1, 2} (one byte per element); code 3 never appears in a
// well-formed tensor and decoding one is a kCorruptFile Status.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "bitnet/status.h"
#include "gguf/types.h"

namespace bitnet::quant {

bool is_ternary(GgmlType type);      // I2_S, TQ2_0, TQ1_0
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, Q8_K, IQ4_NL, IQ4_XS, I2_S, TQ2_0,
// TQ1_0.
bool can_dequantize(GgmlType type);
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K..Q6_K, Q8_K, IQ4_NL, IQ4_XS, I2_S,
// TQ2_0, TQ1_0 (Q8_1 is quantize-only, as in ggml).
bool can_quantize(GgmlType type);

// Dequantizes n elements from src, which must hold exactly ggml_tensor_n_bytes(type, n) bytes,
// into dst[n]. Block formats need n to be a multiple of the block (Q4_0..Q8_0: 32, K quants and
// TQ*: 256, I2_S: 128 and n > 0); I2_S is one unit whose scale trails the codes. Results are
// bit-identical to ggml's dequantize_row_* (bitnet.cpp's for I2_S).
Status dequantize(GgmlType type, std::span<const uint8_t> src, int64_t n, float* dst);

// Elements sharing one scale: I2_S the whole tensor (n), TQ2_0/TQ1_0 256 (their fp16 d),
// 0 for a type that is not ternary.
int64_t ternary_scale_block(GgmlType type, int64_t n);

// codes[n] in {0,1,2}; scales[n / ternary_scale_block(type, n)] (TQ: fp16 d widened).
Status ternary_decode(GgmlType type, std::span<const uint8_t> src, int64_t n, uint8_t* codes,
                      float* scales);

// A ternary tensor of n_rows rows of n_cols, decoded for a backend to repack: codes[n] and one
// scale per `scale_block` elements of a row. A per-tensor scale (I2_S) is repeated once per row
// (scale_block = n_cols) so that kernels see one layout; TQ blocks must tile the rows.
struct TernaryRows {
  std::vector<uint8_t> codes;
  std::vector<float> scales;  // n_rows * (n_cols / scale_block)
  int64_t scale_block = 0;
};
Result<TernaryRows> decode_ternary_rows(GgmlType type, std::span<const uint8_t> src,
                                        int64_t n_cols, int64_t n_rows);

// The owners' reference quantizers: n_rows rows of n_per_row floats -> the type's bytes,
// exactly as ggml's quantize_row_*_ref or bitnet.cpp's quantize_i2_s produce them (I2_S: one
// scale for the whole tensor, see i2s.h for the rule). Non-finite inputs are an error for the
// quantized types; F32/F16/BF16 carry them through.
Result<std::vector<uint8_t>> quantize(GgmlType type, const float* src, int64_t n_rows,
                                      int64_t n_per_row);

// The activation format of a weight type's scalar reference dot product (ggml's vec_dot_type):
// Q8_0 for Q4_0, Q5_0, Q8_0 and IQ4_NL, Q8_1 for Q4_1 and Q5_1, Q8_K for Q2_K..Q6_K and IQ4_XS;
// nullopt for other types.
std::optional<GgmlType> vec_dot_type(GgmlType type);
// ggml's generic ggml_vec_dot_<type>_<vec_dot_type> over n elements (a multiple of the block)
// without checks: w holds n elements of `type`, a n elements of vec_dot_type(type). Null
// exactly where vec_dot_type is empty.
using VecDotFn = float (*)(int64_t n, const uint8_t* w, const uint8_t* a);
VecDotFn vec_dot_fn(GgmlType type);
// The scalar reference dot product (ggml's generic ggml_vec_dot_<type>_<vec_dot_type>) of n
// elements: w of `type`, a of vec_dot_type(type), each exactly n elements' bytes.
Result<float> vec_dot(GgmlType type, std::span<const uint8_t> w, std::span<const uint8_t> a,
                      int64_t n);

// Packs codes[n] in {0,1,2} with scales as in ternary_decode (finite, >= 0; TQ scales must be
// exact in fp16 so that decode(encode(x)) == x). I2_S's 28 trailer bytes are written as zeros.
Result<std::vector<uint8_t>> ternary_encode(GgmlType type, const uint8_t* codes,
                                            const float* scales, int64_t n);

}  // namespace bitnet::quant
