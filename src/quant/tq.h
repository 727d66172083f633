// The TQ1_0 / TQ2_0 family: 256-element blocks, one fp16 scale each, ggml's reference rules.
// Callers (quant.cpp) have checked type, n % 256 == 0 and buffer sizes.
#pragma once

#include <cstdint>

#include "bitnet/status.h"
#include "gguf/types.h"

namespace bitnet::quant {

inline constexpr int64_t kTqBlockElems = 256;  // QK_K

int64_t tq_block_bytes(GgmlType type);  // 54 (TQ1_0) or 66 (TQ2_0)

// ggml's quantize_row_tq{1,2}_0_ref: x[n] (finite) -> dst[n / 256 * block bytes].
void tq_quantize(GgmlType type, const float* x, int64_t n, uint8_t* dst);
// codes[n] in {0,1,2}, scales[n / 256] exact in fp16 -> dst.
void tq_encode(GgmlType type, const uint8_t* codes, const float* scales, int64_t n, uint8_t* dst);
// src -> codes[n], scales[n / 256]; kCorruptFile on a 2-bit code 3.
Status tq_decode(GgmlType type, const uint8_t* src, int64_t n, uint8_t* codes, float* scales);
// src -> dst[n] = (code - 1) * d, as ggml's dequantize_row_tq{1,2}_0.
Status tq_dequantize(GgmlType type, const uint8_t* src, int64_t n, float* dst);

}  // namespace bitnet::quant
