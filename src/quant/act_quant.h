// W2A8 activation quantization, one token (row) at a time (FORMATS.md "Activations"):
//   s = 127 / max(max|x|, 1e-5);  q = clamp(round_half_to_even(x * s), -128, 127);  sum = sum(q)
// Scalar reference: the CPU and GPU kernels are checked against it.
#pragma once

#include <cstdint>

namespace bitnet::quant {

// x[n] -> q[n], *sum = sum of q; returns s (so x ~ q / s). As bitnet.cpp's quantize_row_i8_s:
// max|x| and the 1e-5 floor are taken in double, s = (float)(127.0 / max), x * s is a float
// product. The floor keeps s finite (12,700,000) for an all-zero token, whose q are all 0.
// A NaN in x is skipped by the max and quantizes to 0. sum is exact for n < 2^24.
float act_quant_i8(const float* x, int64_t n, int8_t* q, int32_t* sum);

// One element of act_quant_i8: round_half_to_even(x * s) clamped to [-128, 127], NaN -> 0. The
// SIMD kernels call it for the elements after their last full vector.
int8_t act_quant_one(float x, float s);

}  // namespace bitnet::quant
