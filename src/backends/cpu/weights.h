// CPU-resident weights. Float formats stay memory-mapped (read in place); ternary formats are
// repacked once at load into one layout that every ternary file type shares.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "bitnet/status.h"
#include "hal/ops.h"

namespace bitnet::cpu {

// Ternary weights in the I2_S canonical grouping, row by row (rows of n_cols, n_cols a
// multiple of 128): for each 128-element group, 32 bytes; byte j holds code(j) in bits 7-6,
// code(j+32) in bits 5-4, code(j+64) in bits 3-2, code(j+96) in bits 1-0; code = w + 1.
// One scale per `scale_block` elements of a row (I2_S: the row; TQ1_0/TQ2_0: 256).
struct TernaryWeights {
  std::vector<uint8_t> packed;   // n_rows * n_cols / 4 bytes
  std::vector<float> scales;     // n_rows * (n_cols / scale_block)
  int64_t scale_block = 0;
};

struct CpuWeight {
  GgmlType type = GgmlType::kF32;
  int64_t n_cols = 0;            // ne[0]: row length
  int64_t n_rows = 0;            // ne[1] * ne[2] * ne[3]
  std::span<const uint8_t> raw;  // float formats: the file's bytes
  int64_t row_bytes = 0;         // float formats: bytes per row
  TernaryWeights ternary;        // ternary formats
  std::vector<float> values;     // 1-D weights (norms, scales), dequantized at load
  bool is_ternary() const { return !ternary.packed.empty(); }
};

// Prepares one weight for the CPU kernels (repacks ternary formats).
Result<CpuWeight> prepare_weight(const hal::WeightDesc& desc);

// Packs one-byte codes (n_rows x n_cols, each 0..2) into the grouping above.
void pack_ternary_rows(const uint8_t* codes, int64_t n_rows, int64_t n_cols, uint8_t* packed);

}  // namespace bitnet::cpu
