// CPU-resident weights. Float formats stay memory-mapped (read in place); ternary formats are
// repacked once at load into the layout of the kernel set that reads them.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "bitnet/status.h"
#include "hal/ops.h"

namespace bitnet {
class ThreadPool;
}

namespace bitnet::cpu {

// Columns per ternary code group: 32 bytes of 2-bit codes (the I2_S grouping).
inline constexpr int64_t kGroupCols = 128;
inline constexpr int64_t kGroupBytes = 32;

// Ternary weights, rows interleaved in row groups of `rows_per_group` rows (a kernel set's
// choice, KernelSet::ternary_rows_per_group; 1 is the I2_S file layout row by row).
// n_row_groups = ceil(n_rows / rows_per_group); the last group is padded with rows of code 1
// (w = 0) and scale 0. For row group rg and 128-column group g of a row (n_groups per row):
//   packed[((rg * n_groups + g) * rows_per_group + i) * 32 + j], j in [0, 32), holds for row
//   rg * rows_per_group + i the codes of columns 128g + j, +32, +64, +96 in bits 7-6, 5-4,
//   3-2, 1-0 (high bits first, as I2_S); code = w + 1.
// So one pass over a column group reads the rows of a row group one after the other, and a
// 2-bit field k of the 32 bytes lines up with the 32 activations 128g + 32k .. +31.
// One scale per `scale_block` columns of a row (I2_S: the row; TQ1_0/TQ2_0: 256):
//   scales[(rg * n_blocks + b) * rows_per_group + i] for row rg * rows_per_group + i.
struct TernaryWeights {
  std::vector<uint8_t> packed;  // n_row_groups * rows_per_group * n_cols / 4 bytes
  std::vector<float> scales;    // n_row_groups * n_blocks * rows_per_group
  int64_t scale_block = 0;      // a multiple of kGroupCols
  int32_t rows_per_group = 1;

  // Offset of the 32 code bytes of row r, column group g (n_groups column groups per row).
  size_t group_offset(int64_t r, int64_t g, int64_t n_groups) const {
    const int64_t rg = r / rows_per_group;
    return static_cast<size_t>(((rg * n_groups + g) * rows_per_group + r % rows_per_group) * kGroupBytes);
  }
  // Index into `scales` of row r, scale block b (n_blocks per row).
  size_t scale_index(int64_t r, int64_t b, int64_t n_blocks) const {
    const int64_t rg = r / rows_per_group;
    return static_cast<size_t>((rg * n_blocks + b) * rows_per_group + r % rows_per_group);
  }
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
  // Bytes the backend holds for this weight beyond the mapped file (repacked and 1-D weights).
  uint64_t resident_bytes() const;
};

// Prepares one weight for the CPU kernels: ternary formats are decoded and repacked into row
// groups of `rows_per_group` rows, on `pool`'s threads when one is given.
Result<CpuWeight> prepare_weight(const hal::WeightDesc& desc, int32_t rows_per_group = 1,
                                 ThreadPool* pool = nullptr);

}  // namespace bitnet::cpu
