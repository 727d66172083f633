#include "backends/cuda/w2c_weights.h"

#include <fmt/format.h>

#include <cstring>

#include "backends/cuda/w2a8_math.h"

namespace bitnet::cuda {

namespace {

Result<TernaryFormat> format_of(GgmlType type) {
  switch (type) {
    case GgmlType::kI2_S: return TernaryFormat::kI2S;
    case GgmlType::kTQ2_0: return TernaryFormat::kTQ2_0;
    case GgmlType::kTQ1_0: return TernaryFormat::kTQ1_0;
    default: return unsupported(fmt::format("{} is not a ternary format of the CUDA kernels", ggml_type_name(type)));
  }
}

// One scale per row when every row's blocks share one d (compared bit for bit).
void collapse_uniform_scales(W2cWeight& w) {
  const int64_t n_blocks = w.n_cols / w.scale_block;
  if (n_blocks == 1) return;
  for (int64_t r = 0; r < w.n_rows; ++r) {
    const float* s = w.scales.data() + r * n_blocks;
    for (int64_t b = 1; b < n_blocks; ++b) {
      if (std::memcmp(&s[b], &s[0], sizeof(float)) != 0) return;
    }
  }
  std::vector<float> per_row(static_cast<size_t>(w.n_rows));
  for (int64_t r = 0; r < w.n_rows; ++r) per_row[static_cast<size_t>(r)] = w.scales[static_cast<size_t>(r * n_blocks)];
  w.scales = std::move(per_row);
  w.scale_block = w.n_cols;
}

}  // namespace

Result<W2cWeight> repack_w2c(GgmlType type, std::span<const uint8_t> bytes, int64_t n_cols, int64_t n_rows) {
  BITNET_ASSIGN_OR_RETURN(const TernaryFormat f, format_of(type));
  const int block = ternary_block_cols(f);
  if (n_cols <= 0 || n_rows <= 0 || n_cols % block != 0 || n_cols % kChunkCols != 0) {
    return unsupported(fmt::format("{} tensor of {} x {}: the CUDA W2A8 kernels need rows of a multiple of {} columns",
                                   ggml_type_name(type), n_rows, n_cols, block));
  }
  BITNET_ASSIGN_OR_RETURN(const uint64_t n_bytes, ggml_tensor_n_bytes(type, n_cols * n_rows));
  if (bytes.size() != n_bytes) {
    return corrupt_file(fmt::format("{} tensor of {} x {} has {} bytes, expected {}", ggml_type_name(type), n_rows,
                                    n_cols, bytes.size(), n_bytes));
  }
  W2cWeight w;
  w.n_cols = n_cols;
  w.n_rows = n_rows;
  w.scale_block = f == TernaryFormat::kI2S ? n_cols : 256;
  const int64_t n_words = n_cols / kWordCols;
  const int64_t n_blocks = n_cols / w.scale_block;
  w.words.resize(static_cast<size_t>(n_rows * n_words));
  w.scales.resize(static_cast<size_t>(n_rows * n_blocks));
  const int64_t row_bytes = ternary_row_bytes(f, n_cols);
  float tensor_scale = 0.0f;
  if (f == TernaryFormat::kI2S) std::memcpy(&tensor_scale, bytes.data() + n_rows * row_bytes, sizeof tensor_scale);
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = bytes.data() + r * row_bytes;
    if (!repack_words(f, row, 0, n_words, w.words.data() + r * n_words)) {
      return corrupt_file(fmt::format("{} tensor: row {} holds code 3 (not a ternary value)", ggml_type_name(type), r));
    }
    for (int64_t b = 0; b < n_blocks; ++b) {
      w.scales[static_cast<size_t>(r * n_blocks + b)] = f == TernaryFormat::kI2S ? tensor_scale : tq_block_scale(f, row, b);
    }
  }
  collapse_uniform_scales(w);
  return w;
}

Result<Q8Split> split_q8_0(std::span<const uint8_t> bytes, int64_t n_cols, int64_t n_rows) {
  constexpr int64_t kBlock = 32, kBlockBytes = 34;
  if (n_cols <= 0 || n_rows <= 0 || n_cols % kBlock != 0) {
    return unsupported(fmt::format("Q8_0 tensor of {} x {}: rows must be whole blocks of 32", n_rows, n_cols));
  }
  const int64_t n_blocks = n_cols / kBlock * n_rows;
  if (static_cast<int64_t>(bytes.size()) != n_blocks * kBlockBytes) {
    return corrupt_file(fmt::format("Q8_0 tensor of {} x {} has {} bytes, expected {}", n_rows, n_cols, bytes.size(),
                                    n_blocks * kBlockBytes));
  }
  Q8Split s;
  s.q.resize(static_cast<size_t>(n_blocks * kBlock));
  s.d.resize(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = bytes.data() + b * kBlockBytes;
    s.d[static_cast<size_t>(b)] = half_bits_to_float(static_cast<uint16_t>(block[0] | (block[1] << 8)));
    std::memcpy(s.q.data() + b * kBlock, block + 2, kBlock);
  }
  return s;
}

}  // namespace bitnet::cuda
