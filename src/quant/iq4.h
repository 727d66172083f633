// IQ4_NL (GGML type 20) and IQ4_XS (type 23): 4-bit codes indexing a fixed non-linear table,
// as ggml-common.h's block_iq4_nl / block_iq4_xs, with the arithmetic of ggml-quants.c's
// quantize_row_iq4_{nl,xs}_ref and dequantize_row_iq4_{nl,xs} and of the generic
// ggml_vec_dot_iq4_nl_q8_0 / ggml_vec_dot_iq4_xs_q8_K of ggml-cpu-quants.c at llama.cpp
// c392e5094deaf2d1a7c18683214f007fad3fe42b.
//
// IQ4_NL, 32 elements in 18 bytes:
//   uint16_t d;       // fp16 scale
//   uint8_t  qs[16];  // element j in the low nibble of qs[j], j + 16 in the high nibble
//   w = d * kIq4NlValues[q]
// IQ4_XS, 256 elements in 136 bytes, 8 sub-blocks of 32:
//   uint16_t d;            // fp16 super-block scale
//   uint16_t scales_h;     // top 2 bits of the 6-bit scale of sub-block s at bits 2s..2s+1
//   uint8_t  scales_l[4];  // low 4 bits of scale s in scales_l[s / 2], nibble s % 2
//   uint8_t  qs[128];      // sub-block s in qs[16s .. 16s+15], laid out as an IQ4_NL block
//   w = (d * (scale - 32)) * kIq4NlValues[q]
#pragma once

#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kIq4NlBlockElems = 32;
inline constexpr int64_t kIq4NlBlockBytes = 18;
inline constexpr int64_t kIq4XsBlockBytes = 136;

// ggml's kvalues_iq4nl.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// quantize_row_iq4_nl_ref for one block: x[32] (finite) -> dst[18]. ggml's reference
// (quantize_row_iq4_nl_impl with ntry = -1, no importance weights): d = max / -127, each element
// to the nearest table value, then d = the least-squares scale of those codes (weights x^2).
// An all-zero block (max |x| < 1e-15) gets d = 0 and its qs are left as they are: ggml writes
// the codes of the previous block there (its code buffer is not cleared), which quant::quantize
// reproduces by copying them in before the call (zeros at the start of a row).
void iq4_nl_quantize_block(const float* x, uint8_t* dst);
// quantize_row_iq4_xs_ref for one block: x[256] (finite) -> dst[136]. ggml's quantize_iq4_xs
// without importance weights (ntry = 7): per sub-block of 32 the least-squares scale of the
// first guess and of 15 more starting scales (id = (t - 127) / max, t in -7..7); the scales to
// 6 bits against d = -(scale of largest magnitude) / 32, then the codes again from them.
void iq4_xs_quantize_block(const float* x, uint8_t* dst);

// dequantize_row_iq4_nl: src[18] -> y[32].
void iq4_nl_dequantize_block(const uint8_t* src, float* y);
// dequantize_row_iq4_xs: src[136] -> y[256].
void iq4_xs_dequantize_block(const uint8_t* src, float* y);

// Scalar twins of ggml's generic dot products over n elements: w holds the weight blocks, a the
// activation blocks (q8_0.h, q8_k.h). Integer sums of table value * q8 are exact; the float
// steps are ggml's:
//   iq4_nl (n a multiple of 32), per block:  sum += (d_a * d_w) * sumi
//   iq4_xs (n a multiple of 256), per 32-element sub-block s:
//                                            sum += ((d_w * d_a) * (scale_s - 32)) * sumi_s
float vec_dot_iq4_nl_q8_0(int64_t n, const uint8_t* w, const uint8_t* a);
float vec_dot_iq4_xs_q8_K(int64_t n, const uint8_t* w, const uint8_t* a);

}  // namespace bitnet::quant
