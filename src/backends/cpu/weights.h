// CPU-resident weights. Float formats stay memory-mapped (read in place), but for large ones,
// copied onto huge pages; ternary formats are repacked once at load into the layout of the
// kernel set that reads them.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "bitnet/status.h"
#include "core/aligned_vector.h"
#include "hal/ops.h"

namespace bitnet {
class ThreadPool;
}

namespace bitnet::cpu {

// Columns per ternary code group: 32 bytes of 2-bit codes (the I2_S grouping).
inline constexpr int64_t kGroupCols = 128;
inline constexpr int64_t kGroupBytes = 32;

// The byte layouts a kernel set may read ternary weights in (KernelSet::ternary_layout).
enum class TernaryLayout : uint8_t {
  k2Bit,   // 2 bits per weight (code = w + 1), the I2_S grouping: the layout below
  k5Trit,  // 5 trits per byte, 1.6 bits per weight ("T5", below): 20% fewer bytes per decoded token
};

// Ternary weights, rows interleaved in row groups of `rows_per_group` rows (a kernel set's
// choice, KernelSet::ternary_rows_per_group; 1 is the I2_S file layout row by row).
// n_row_groups = ceil(n_rows / rows_per_group); the last group is padded with rows of code 1
// (w = 0) and scale 0. For row group rg and 128-column group g of a row (n_groups per row):
//   packed[((rg * n_groups + g) * rows_per_group + i) * 32 + j], j in [0, 32), holds for row
//   rg * rows_per_group + i the codes of columns 128g + j, +32, +64, +96 in bits 7-6, 5-4,
//   3-2, 1-0 (high bits first, as I2_S); code = w + 1.
// So one pass over a column group reads the rows of a row group one after the other, and a
// 2-bit field k of the 32 bytes lines up with the 32 activations 128g + 32k .. +31.
// One scale per `scale_block` columns of a row (I2_S: the row; TQ1_0/TQ2_0: 256, or the row when
// every row's blocks share one scale, as in files made from a BitNet checkpoint):
//   scales[(rg * n_blocks + b) * rows_per_group + i] for row rg * rows_per_group + i.
//
// T5 layout (layout == k5Trit, rows_per_group == kT5Rows): a row is cut into vectors of 64
// bytes; byte j of a vector holds 5 codes c_0..c_4 (positions) as
//   q = ceil(v * 256 / 243),  v = c_0 * 81 + c_1 * 27 + c_2 * 9 + c_3 * 3 + c_4
// (llama.cpp's TQ1_0 byte), so that with m_0 = q, m_{i+1} = 3 m_i mod 256:
//   c_i = floor(3 m_i / 256),  i.e.  256 c_i = 3 m_i - m_{i+1}.
// Columns come in chunks of 1280 (five 256-column scale blocks) held by 4 vectors. Vector v of
// chunk k holds at position i < 4, byte j, column 1280k + 256 (j / 16) + 64v + 16i + j % 16: its
// 16-byte quarter q carries block q of the chunk only, so that the 4 int32 lanes a kernel sums
// those bytes into are the block's. Position 4 holds column 1280k + 1024 + 64v + j (block 4).
// The last n_cols % 1280 columns take vectors of positions 0-3 only (column
// 1280 * n_chunks + 256w + 64i + j for the tail's vector w; the last one 2 positions if
// n_cols % 256 == 128); unused positions hold code 1. Vector u of row rg * 4 + i is at
// packed[((rg * n_vectors + u) * 4 + i) * 64]; scales as above. Used for scale blocks of 256
// columns or of a whole row (t5_fits).
struct TernaryWeights {
  // 64-byte aligned; 2-bit: n_row_groups * rows_per_group * n_cols / 4 bytes; T5: n_row_groups *
  // 4 * t5_vectors(n_cols) * 64 bytes. Its resize writes nothing (prepare_weight fills it).
  UninitAlignedVector<uint8_t> packed;
  std::vector<float> scales;    // n_row_groups * n_blocks * rows_per_group
  int64_t scale_block = 0;      // a multiple of kGroupCols
  int32_t rows_per_group = 1;
  TernaryLayout layout = TernaryLayout::k2Bit;

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

inline constexpr int32_t kT5Rows = 4;
inline constexpr int64_t kT5ChunkCols = 1280;
inline constexpr int64_t kT5VectorBytes = 64;

// 64-byte vectors per row of n_cols columns in the T5 layout.
int64_t t5_vectors(int64_t n_cols);
// The column that position i (0..4) of byte j of vector u holds in a row of n_cols, or -1.
int64_t t5_column(int64_t n_cols, int64_t u, int i, int64_t j);
// The columns of position i of vector u's 64 bytes, as t5_column.
void t5_columns(int64_t n_cols, int64_t u, int i, int64_t cols[kT5VectorBytes]);
// Whether the T5 layout holds a weight of rows of n_cols with scale blocks of scale_block: the
// kernels take 256-column blocks or one per row, and rows under 32768 columns (so that
// 3 * sum(m * q) - sum(m' * q) = 256 * dot stays exact in int32).
bool t5_fits(int64_t n_cols, int64_t scale_block);
// The T5 byte of 5 codes in {0, 1, 2} (c[0] first).
uint8_t t5_byte(const uint8_t c[5]);

struct CpuWeight {
  CpuWeight() = default;
  CpuWeight(CpuWeight&&) noexcept = default;  // the buffers move, so `raw` stays valid
  CpuWeight& operator=(CpuWeight&&) noexcept = default;
  // Not copyable: a copy's `raw` would still point into the original's `owned`.
  CpuWeight(const CpuWeight&) = delete;
  CpuWeight& operator=(const CpuWeight&) = delete;

  GgmlType type = GgmlType::kF32;
  int64_t n_cols = 0;            // ne[0]: row length
  int64_t n_rows = 0;            // ne[1] * ne[2] * ne[3]
  std::span<const uint8_t> raw;  // float formats: the file's bytes, or `owned`
  UninitAlignedVector<uint8_t> owned;  // a large float weight's copy on huge pages (weights.cpp)
  int64_t row_bytes = 0;         // float formats: bytes per row
  TernaryWeights ternary;        // ternary formats
  std::vector<float> values;     // 1-D weights (norms, scales), dequantized at load
  bool q6_K_lanes = false;       // Q6_K: `owned` holds the blocks in lane order (q6_K_lanes.h)
  bool is_ternary() const { return !ternary.packed.empty(); }
  // Bytes the backend holds for this weight beyond the mapped file (repacked, copied and 1-D
  // weights).
  uint64_t resident_bytes() const;
  // Bytes the kernels read for one use of the weight: the ternary repack, the dequantized
  // values of a one-row weight, else the file's bytes (raw).
  uint64_t read_bytes() const;
};

// Prepares one weight for the CPU kernels: ternary formats are decoded and repacked into row
// groups of `rows_per_group` rows, on `pool`'s threads when one is given; in `layout` when
// it holds the weight (t5_fits), else in the 2-bit layout (which every set also reads). With
// q6_K_lanes, a Q6_K weight that is copied out of the file anyway (file-backed, on huge pages)
// is copied in lane order (q6_K_lanes.h); other Q6_K weights keep the file's order.
Result<CpuWeight> prepare_weight(const hal::WeightDesc& desc, int32_t rows_per_group = 1,
                                 ThreadPool* pool = nullptr, TernaryLayout layout = TernaryLayout::k2Bit,
                                 bool q6_K_lanes = false);

// Per-thread scratch of the T5 prefill: a 2-bit copy (rows_per_group 4) of n_row_groups row
// groups of `w` (its packed and scales sized, contents left to the caller). Grown once per
// thread; nothing is allocated per call after that.
struct T5Scratch {
  CpuWeight w;
  std::vector<uint8_t> codes;  // n_cols: one row's codes in column order
};
T5Scratch& t5_prefill_scratch(const CpuWeight& w, int64_t n_row_groups);

// Per-thread scratch of the T5 kernels: n_tokens tokens' activations in T5 order (vector by
// vector, position by position: q[t * n_cols + 1280k + 320v + 64i + j] =
// x_t[t5_column(n_cols, 4k + v, i, j)], the tail as in x) and the first token's sums per
// 256-column block; sized for n_cols and n_tokens, contents left to the caller.
struct T5Act {
  AlignedVector<int8_t> q;  // 64-byte aligned: a position's activations are one cache line
  std::vector<int32_t> block_sum;
};
T5Act& t5_act_scratch(int64_t n_cols, int64_t n_tokens = 1);

}  // namespace bitnet::cpu
