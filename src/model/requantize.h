// Requantizing a weight at load (`--head-type`): the output head is the largest tensor read per
// decoded token (a tied F16 embedding of 128256 x 2560 is 657 MB on the 2B-4T shape), so a
// smaller head type speeds up decoding; bitnet.cpp and llama.cpp ship Q6_K heads by default.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "bitnet/status.h"
#include "hal/ops.h"

namespace bitnet {

// The head types `--head-type` accepts ("f16", "q8_0", "q6_K"; case-insensitive).
Result<GgmlType> parse_head_type(std::string_view name);

// Row by row: dequantize each row of `w` and quantize it to `type` with the owner's reference
// quantizer, on n_threads threads. Rows must be whole blocks of `type`.
Result<std::vector<uint8_t>> requantize_rows(const hal::WeightDesc& w, GgmlType type, int n_threads);
// The bytes of `w` requantized to `type`, and requantize_rows into a caller's buffer of that size
// (the engine's head, on huge pages: core/huge_pages.h).
Result<uint64_t> requantized_bytes(const hal::WeightDesc& w, GgmlType type);
Status requantize_rows_into(const hal::WeightDesc& w, GgmlType type, int n_threads, std::span<uint8_t> out);

}  // namespace bitnet
