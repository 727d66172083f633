#include "backends/cpu/weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "backends/cpu/q6_K_lanes.h"
#include "core/fp16.h"
#include "core/mmap_file.h"
#include "core/thread_pool.h"
#include "quant/i2s.h"
#include "quant/q6_k.h"
#include "quant/quant.h"
#include "quant/tq2_0.h"

namespace bitnet::cpu {

namespace {

// Row groups repacked per parallel chunk: large enough that decoding a chunk (one small
// allocation) is cheap next to its work, small enough to balance 2..64 threads.
constexpr int64_t kRowsPerRepackChunk = 64;

// Rows [r0, r1) of a ternary tensor as a standalone tensor of the same type. TQ rows are whole
// blocks and slice in place; I2_S keeps its one scale in a trailer after all the codes, so the
// rows' code bytes and that trailer are copied into `scratch`.
std::span<const uint8_t> row_range(GgmlType type, std::span<const uint8_t> bytes, int64_t n_cols,
                                   int64_t n_rows, int64_t r0, int64_t r1,
                                   std::vector<uint8_t>& scratch) {
  if (type != GgmlType::kI2_S) {
    const auto row_bytes = static_cast<size_t>(bytes.size() / static_cast<size_t>(n_rows));
    return bytes.subspan(static_cast<size_t>(r0) * row_bytes, static_cast<size_t>(r1 - r0) * row_bytes);
  }
  const auto row_bytes = static_cast<size_t>(n_cols / 4);
  const auto codes = static_cast<size_t>(r1 - r0) * row_bytes;
  const auto trailer = bytes.subspan(static_cast<size_t>(n_rows) * row_bytes, quant::kI2sTrailerBytes);
  scratch.resize(codes + trailer.size());
  std::memcpy(scratch.data(), bytes.data() + static_cast<size_t>(r0) * row_bytes, codes);
  std::memcpy(scratch.data() + codes, trailer.data(), trailer.size());
  return scratch;
}

// Whether any 2-bit field of the 32 bytes at p holds code 3 (both bits of a pair set).
bool has_code_3(const uint8_t* p) {
  uint64_t any = 0;
  for (int i = 0; i < 4; ++i) {
    uint64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    any |= v & (v >> 1) & 0x5555555555555555u;
  }
  return any != 0;
}

// Where group g of row r of an I2_S or TQ2_0 tensor lies in the file: I2_S, 32 bytes per
// group, rows after rows; TQ2_0, one 66-byte block per two groups (64 code bytes, then d).
const uint8_t* file_group(const hal::WeightDesc& d, int64_t n_groups, int64_t r, int64_t g) {
  return d.type == GgmlType::kTQ2_0
             ? d.bytes.data() + (r * n_groups + g) / 2 * quant::kTq2_0BlockBytes + g % 2 * kGroupBytes
             : d.bytes.data() + (r * n_groups + g) * kGroupBytes;
}

// The scales of row r of an I2_S or TQ2_0 tensor into row r of `t` (I2_S: its one scale in
// every block; TQ2_0: each block's fp16 d, after its 64 code bytes).
void set_file_row_scales(const hal::WeightDesc& d, int64_t n_rows, int64_t n_cols, int64_t r, TernaryWeights& t) {
  const int64_t n_blocks = n_cols / t.scale_block;
  for (int64_t b = 0; b < n_blocks; ++b) {
    float scale;
    if (d.type == GgmlType::kTQ2_0) {
      uint16_t half;
      std::memcpy(&half, d.bytes.data() + (r * n_blocks + b) * quant::kTq2_0BlockBytes + 2 * kGroupBytes, 2);
      scale = fp16_to_fp32(half);
    } else {
      std::memcpy(&scale, d.bytes.data() + n_rows * n_cols / 4, 4);
    }
    t.scales[t.scale_index(r, b, n_blocks)] = scale;
  }
}

// The codes of row r of an I2_S or TQ2_0 tensor in column order, by the formats' own unpackers.
// False when a code 3 shows up (has_code_3 on the file's bytes): the format's decoder then
// names the element.
bool file_row_codes(const hal::WeightDesc& d, int64_t n_cols, int64_t r, uint8_t* codes) {
  const int64_t n_groups = n_cols / kGroupCols;
  const bool tq2 = d.type == GgmlType::kTQ2_0;
  for (int64_t g = 0; g < n_groups; g += tq2 ? 2 : 1) {  // a TQ2_0 block is two groups
    const uint8_t* src = file_group(d, n_groups, r, g);
    if (has_code_3(src) || (tq2 && has_code_3(src + kGroupBytes))) return false;
    if (tq2) {
      quant::tq2_0_unpack_block(src, codes + g * kGroupCols);
    } else {
      quant::i2s_unpack_group(src, codes + g * kGroupCols);
    }
  }
  return true;
}

// I2_S and TQ2_0 files hold the repacked code bytes already (TQ2_0 with each byte's bit pairs
// reversed, quant/i2s.h): rows [r0, r1) are copied group by group without decoding, with their
// scales. False, with nothing to trust in `t`, when a code 3 shows up: the format's decoder
// then names the element.
bool copy_code_bytes(const hal::WeightDesc& d, int64_t n_cols, int64_t n_rows, int64_t r0, int64_t r1,
                     TernaryWeights& t) {
  const int64_t n_groups = n_cols / kGroupCols;
  const bool tq2 = d.type == GgmlType::kTQ2_0;
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* src = file_group(d, n_groups, r, g);
      if (has_code_3(src)) return false;
      uint8_t* dst = t.packed.data() + t.group_offset(r, g, n_groups);
      if (tq2) {
        for (int64_t j = 0; j < kGroupBytes; ++j) dst[j] = quant::reverse_bit_pairs(src[j]);
      } else {
        std::memcpy(dst, src, kGroupBytes);
      }
    }
    set_file_row_scales(d, n_rows, n_cols, r, t);
  }
  return true;
}

// Writes the row groups [rg0, rg1) of `t` (rows clipped to n_rows) from the file's bytes.
Status repack_row_groups(const hal::WeightDesc& d, int64_t n_cols, int64_t n_rows, int64_t rg0,
                         int64_t rg1, TernaryWeights& t) {
  const int64_t rows = t.rows_per_group;
  const int64_t r0 = rg0 * rows;
  const int64_t r1 = std::min(n_rows, rg1 * rows);
  if ((d.type == GgmlType::kI2_S || d.type == GgmlType::kTQ2_0) && copy_code_bytes(d, n_cols, n_rows, r0, r1, t)) {
    return {};
  }
  std::vector<uint8_t> scratch;
  const auto src = row_range(d.type, d.bytes, n_cols, n_rows, r0, r1, scratch);
  BITNET_ASSIGN_OR_RETURN(quant::TernaryRows decoded, quant::decode_ternary_rows(d.type, src, n_cols, r1 - r0));
  const int64_t n_groups = n_cols / kGroupCols;
  const int64_t n_blocks = n_cols / t.scale_block;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* codes = decoded.codes.data() + (r - r0) * n_cols;
    for (int64_t g = 0; g < n_groups; ++g) {
      quant::i2s_pack_group(codes + g * kGroupCols, t.packed.data() + t.group_offset(r, g, n_groups));
    }
    for (int64_t b = 0; b < n_blocks; ++b) {
      t.scales[t.scale_index(r, b, n_blocks)] = decoded.scales[static_cast<size_t>((r - r0) * n_blocks + b)];
    }
  }
  return {};
}

// The T5 byte of a base-3 value v < 243, ceil(v * 256 / 243), in 16 bits (v * 256 + 242 fits)
// so that the loops below vectorize.
inline uint8_t t5_byte_of(unsigned v) {
  return static_cast<uint8_t>(static_cast<uint16_t>(v * 256 + 242) / uint16_t{243});
}

// The T5 bytes (weights.h) of one row from its codes in column order; the inner loops run over
// 16 consecutive columns.
void t5_pack_row(const uint8_t* codes, int64_t n_cols, uint8_t* dst, int64_t vector_stride) {
  const int64_t n_chunks = n_cols / kT5ChunkCols;
  for (int64_t k = 0; k < n_chunks; ++k) {
    const uint8_t* c = codes + kT5ChunkCols * k;
    for (int64_t v = 0; v < 4; ++v, dst += vector_stride) {
      for (int64_t b = 0; b < 4; ++b) {
        const uint8_t* p = c + 256 * b + 64 * v;  // position 0 of quarter b; position i at + 16i
        const uint8_t* p4 = c + 1024 + 64 * v + 16 * b;
        for (int64_t j = 0; j < 16; ++j) {
          dst[16 * b + j] = t5_byte_of(p[j] * 81u + p[16 + j] * 27u + p[32 + j] * 9u + p[48 + j] * 3u + p4[j]);
        }
      }
    }
  }
  for (int64_t col0 = kT5ChunkCols * n_chunks; col0 < n_cols; col0 += 256, dst += vector_stride) {
    const int64_t n_pos = std::min<int64_t>(4, (n_cols - col0) / 64);
    for (int64_t j = 0; j < kT5VectorBytes; ++j) {
      unsigned value = 0;
      for (int64_t i = 0; i < 5; ++i) value = 3 * value + (i < n_pos ? codes[col0 + 64 * i + j] : 1u);
      dst[j] = t5_byte_of(value);
    }
  }
}

// Writes the row groups [rg0, rg1) of a T5 weight from the file's bytes. I2_S and TQ2_0 rows are
// read as codes straight from their bit pairs (file_row_codes); other formats, and rows holding
// a code 3 (whose error the decoder names), go through quant::decode_ternary_rows.
Status repack_t5_row_groups(const hal::WeightDesc& d, int64_t n_cols, int64_t n_rows, int64_t rg0, int64_t rg1,
                            TernaryWeights& t) {
  const int64_t r0 = rg0 * kT5Rows;
  const int64_t r1 = std::min(n_rows, rg1 * kT5Rows);
  const int64_t n_vec = t5_vectors(n_cols);
  const int64_t n_blocks = n_cols / t.scale_block;
  const auto vectors_of = [&](int64_t r) {
    return t.packed.data() + ((r / kT5Rows * n_vec) * kT5Rows + r % kT5Rows) * kT5VectorBytes;
  };
  if (d.type == GgmlType::kI2_S || d.type == GgmlType::kTQ2_0) {
    // One row at a time: its codes straight from the file's bytes, then packed.
    std::vector<uint8_t> codes(static_cast<size_t>(n_cols));
    bool ok = true;
    for (int64_t r = r0; r < r1; ++r) {
      ok = file_row_codes(d, n_cols, r, codes.data());
      if (!ok) break;
      t5_pack_row(codes.data(), n_cols, vectors_of(r), kT5Rows * kT5VectorBytes);
      set_file_row_scales(d, n_rows, n_cols, r, t);
    }
    if (ok) return {};
  }
  std::vector<uint8_t> scratch;
  const auto src = row_range(d.type, d.bytes, n_cols, n_rows, r0, r1, scratch);
  BITNET_ASSIGN_OR_RETURN(quant::TernaryRows decoded, quant::decode_ternary_rows(d.type, src, n_cols, r1 - r0));
  for (int64_t r = r0; r < r1; ++r) {
    t5_pack_row(decoded.codes.data() + (r - r0) * n_cols, n_cols, vectors_of(r), kT5Rows * kT5VectorBytes);
    for (int64_t b = 0; b < n_blocks; ++b) {
      t.scales[t.scale_index(r, b, n_blocks)] = decoded.scales[static_cast<size_t>((r - r0) * n_blocks + b)];
    }
  }
  return {};
}

// A weight whose rows each hold one scale in every block (TQ1_0/TQ2_0 files made from a BitNet
// checkpoint, which has one scale per tensor) keeps one scale per row, as I2_S does: the
// kernels then sum a row's blocks in int32 and apply the scale once, which is the same value
// up to float rounding (sum of (dot_b - sum_b) / s * scale over b, against (dot - sum) / s *
// scale) and spares the per-block float update. Scales are compared bit for bit.
void collapse_uniform_scales(int64_t n_cols, TernaryWeights& t) {
  const int64_t n_blocks = n_cols / t.scale_block;
  if (n_blocks == 1) return;
  const int64_t n_rows = static_cast<int64_t>(t.scales.size()) / n_blocks;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float first = t.scales[t.scale_index(r, 0, n_blocks)];
    for (int64_t b = 1; b < n_blocks; ++b) {
      const float s = t.scales[t.scale_index(r, b, n_blocks)];
      if (std::memcmp(&s, &first, sizeof s) != 0) return;
    }
  }
  std::vector<float> per_row(static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) per_row[static_cast<size_t>(r)] = t.scales[t.scale_index(r, 0, n_blocks)];
  t.scale_block = n_cols;
  t.scales = std::move(per_row);  // scale_index(r, 0, 1) == r
}

Status prepare_ternary(const hal::WeightDesc& d, CpuWeight& w, int32_t rows_per_group, ThreadPool* pool,
                       TernaryLayout layout) {
  if (w.n_cols % kGroupCols != 0) {
    return unsupported(fmt::format("ternary tensor {} has rows of {} elements; the CPU kernels "
                                   "need a multiple of {}", d.name, w.n_cols, kGroupCols));
  }
  const int64_t n = w.n_cols * w.n_rows;
  BITNET_ASSIGN_OR_RETURN(const uint64_t n_bytes, ggml_tensor_n_bytes(d.type, n));
  if (n == 0 || d.bytes.size() != n_bytes) {
    return corrupt_file(fmt::format("ternary tensor {} of {} elements has {} bytes", d.name, n, d.bytes.size()));
  }
  TernaryWeights& t = w.ternary;
  t.rows_per_group = rows_per_group;
  // A per-tensor scale (I2_S) is kept once per row, as quant::decode_ternary_rows does.
  const int64_t block = quant::ternary_scale_block(d.type, n);
  t.scale_block = block == n ? w.n_cols : block;
  if (w.n_cols % t.scale_block != 0) {
    return unsupported(fmt::format("{}: scale blocks of {} do not tile rows of {}", d.name, t.scale_block, w.n_cols));
  }
  const bool t5 = layout == TernaryLayout::k5Trit && rows_per_group == kT5Rows && t5_fits(w.n_cols, t.scale_block);
  t.layout = t5 ? TernaryLayout::k5Trit : TernaryLayout::k2Bit;
  const int64_t n_row_groups = (w.n_rows + rows_per_group - 1) / rows_per_group;
  const int64_t group_bytes = t5 ? kT5Rows * t5_vectors(w.n_cols) * kT5VectorBytes : rows_per_group * w.n_cols / 4;
  // Left unwritten here: the threads that repack the row groups touch their pages first.
  t.packed.resize(static_cast<size_t>(n_row_groups * group_bytes));
  t.scales.assign(static_cast<size_t>(n_row_groups * rows_per_group * (w.n_cols / t.scale_block)), 0.0f);
  // Padding rows (in the last row group): code 1 (w = 0) in every 2-bit field or T5 position,
  // scale 0. The repack writes every byte of the real rows.
  const uint8_t zero[5] = {1, 1, 1, 1, 1};
  const uint8_t padding = t5 ? t5_byte(zero) : 0x55;
  const bool padded = w.n_rows % rows_per_group != 0;

  std::mutex mutex;
  Status first_error;
  const auto repack = [&](int64_t rg0, int64_t rg1) {
    if (padded && rg1 == n_row_groups) {
      std::memset(t.packed.data() + (n_row_groups - 1) * group_bytes, padding, static_cast<size_t>(group_bytes));
    }
    Status s = t5 ? repack_t5_row_groups(d, w.n_cols, w.n_rows, rg0, rg1, t)
                  : repack_row_groups(d, w.n_cols, w.n_rows, rg0, rg1, t);
    std::lock_guard<std::mutex> lock(mutex);
    if (!s.ok() && first_error.ok()) first_error = std::move(s);
  };
  const int64_t chunk = std::max<int64_t>(1, kRowsPerRepackChunk / rows_per_group);
  if (pool != nullptr) {
    pool->parallel_for(n_row_groups, chunk, repack);
  } else {
    repack(0, n_row_groups);
  }
  BITNET_RETURN_IF_ERROR(first_error.with_context(d.name));
  collapse_uniform_scales(w.n_cols, t);
  return {};
}

}  // namespace

int64_t t5_vectors(int64_t n_cols) {
  return 4 * (n_cols / kT5ChunkCols) + (n_cols % kT5ChunkCols + 255) / 256;
}

int64_t t5_column(int64_t n_cols, int64_t u, int i, int64_t j) {
  const int64_t n_chunks = n_cols / kT5ChunkCols;
  if (u < 4 * n_chunks) {
    const int64_t k = u / 4, v = u % 4;
    return i < 4 ? kT5ChunkCols * k + 256 * (j / 16) + 64 * v + 16 * i + j % 16 : kT5ChunkCols * k + 1024 + 64 * v + j;
  }
  const int64_t col = kT5ChunkCols * n_chunks + 256 * (u - 4 * n_chunks) + 64 * i + j;
  return i < 4 && col < n_cols ? col : -1;
}

void t5_columns(int64_t n_cols, int64_t u, int i, int64_t cols[kT5VectorBytes]) {
  for (int64_t j = 0; j < kT5VectorBytes; ++j) cols[j] = t5_column(n_cols, u, i, j);
}

bool t5_fits(int64_t n_cols, int64_t scale_block) {
  return n_cols % kGroupCols == 0 && n_cols < 32768 && (scale_block == 256 || scale_block == n_cols);
}

uint8_t t5_byte(const uint8_t c[5]) {
  unsigned v = 0;
  for (int i = 0; i < 5; ++i) v = 3 * v + c[i];
  return t5_byte_of(v);
}

T5Scratch& t5_prefill_scratch(const CpuWeight& w, int64_t n_row_groups) {
  thread_local T5Scratch s;
  s.w.type = w.type;
  s.w.n_cols = w.n_cols;
  s.w.n_rows = n_row_groups * kT5Rows;
  TernaryWeights& t = s.w.ternary;
  t.layout = TernaryLayout::k2Bit;
  t.rows_per_group = kT5Rows;
  t.scale_block = w.ternary.scale_block;
  t.packed.resize(static_cast<size_t>(n_row_groups * kT5Rows * w.n_cols / 4));
  t.scales.resize(static_cast<size_t>(n_row_groups * kT5Rows * (w.n_cols / t.scale_block)));
  s.codes.resize(static_cast<size_t>(w.n_cols));
  return s;
}

T5Act& t5_act_scratch(int64_t n_cols, int64_t n_tokens) {
  thread_local T5Act a;
  a.q.resize(static_cast<size_t>(n_cols * n_tokens));
  a.block_sum.resize(static_cast<size_t>(n_cols / 256 + 1));
  return a;
}

uint64_t CpuWeight::resident_bytes() const {
  return ternary.packed.size() + ternary.scales.size() * sizeof(float) + values.size() * sizeof(float) + owned.size();
}

uint64_t CpuWeight::read_bytes() const {
  if (!values.empty()) return values.size() * sizeof(float);
  return ternary.packed.empty() ? raw.size() : resident_bytes();
}

namespace {

// A large float weight (the embedding and head, 657 MB in F16 for 2B-4T) is read once per
// decoded token: it is copied from the file mapping's 4 KB pages onto huge pages (core/
// huge_pages.h), in slices of about 16 MB that the pool's threads take in turn (each faulting
// in, and so zeroing, its own part of the copy), each slice's mapped pages released once
// copied, so resident memory never holds both. With `q6_K_lanes` (a Q6_K weight of several rows)
// the slices hold whole blocks and each block lands in lane order (q6_K_lanes.h) as it is
// copied: one pass over the weight, not a copy and then a permutation in place.
void copy_to_huge_pages(std::span<const uint8_t> bytes, CpuWeight& w, ThreadPool* pool, bool q6_K_lanes) {
  constexpr int64_t kBlockBytes = quant::kQ6_KBlockBytes;
  const int64_t slice_bytes = q6_K_lanes ? (int64_t{16} << 20) / kBlockBytes * kBlockBytes : int64_t{16} << 20;
  w.owned.resize(bytes.size());  // filled by the copy itself, not zeroed first
  const auto copy = [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const size_t at = static_cast<size_t>(s * slice_bytes);
      const std::span<const uint8_t> slice =
          bytes.subspan(at, std::min(static_cast<size_t>(slice_bytes), bytes.size() - at));
      if (q6_K_lanes) {
        q6_K_blocks_to_lanes(slice.data(), w.owned.data() + at, static_cast<int64_t>(slice.size()) / kBlockBytes);
      } else {
        std::memcpy(w.owned.data() + at, slice.data(), slice.size());
      }
      release_mapped_pages(slice);
    }
  };
  const int64_t n_slices = (static_cast<int64_t>(bytes.size()) + slice_bytes - 1) / slice_bytes;
  if (pool != nullptr) {
    pool->parallel_for(n_slices, 1, copy);
  } else {
    copy(0, n_slices);
  }
  // The pages that straddle the slices' edges (kept by both slices) go too.
  release_mapped_pages(bytes);
  w.raw = std::span<const uint8_t>(w.owned.data(), w.owned.size());
  w.q6_K_lanes = q6_K_lanes;
}

}  // namespace

Result<CpuWeight> prepare_weight(const hal::WeightDesc& d, int32_t rows_per_group, ThreadPool* pool,
                                 TernaryLayout layout, bool q6_K_lanes) {
  CpuWeight w;
  w.type = d.type;
  w.n_cols = d.ne[0];
  w.n_rows = d.ne[1] * d.ne[2] * d.ne[3];
  if (quant::is_ternary(d.type)) {
    BITNET_RETURN_IF_ERROR(prepare_ternary(d, w, rows_per_group, pool, layout));
    // The kernels read only the repacked copy: the file's pages need not stay resident too.
    if (d.file_backed) release_mapped_pages(d.bytes);
    return w;
  }
  BITNET_ASSIGN_OR_RETURN(uint64_t row_bytes, ggml_tensor_n_bytes(d.type, w.n_cols));
  w.raw = d.bytes;
  // (A one-row weight is read only as the values dequantized below, in the file's order.)
  if (d.file_backed && d.bytes.size() >= kHugeBlockBytes) {
    copy_to_huge_pages(d.bytes, w, pool, q6_K_lanes && d.type == GgmlType::kQ6_K && w.n_rows > 1);
  }
  w.row_bytes = static_cast<int64_t>(row_bytes);
  if (w.n_rows == 1) {
    w.values.resize(static_cast<size_t>(w.n_cols));
    BITNET_RETURN_IF_ERROR(quant::dequantize(d.type, w.raw, w.n_cols, w.values.data()).with_context(d.name));
  }
  return w;
}

}  // namespace bitnet::cpu
