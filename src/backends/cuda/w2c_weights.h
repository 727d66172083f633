// Host side of the CUDA backend's ternary weights: a file tensor (I2_S, TQ2_0, TQ1_0) repacked
// into the W2C layout of w2a8_math.h, ready to upload. Plain C++ (no CUDA headers), so the
// repack is tested on any machine.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bitnet/status.h"
#include "gguf/types.h"

namespace bitnet::cuda {

struct W2cWeight {
  std::vector<uint32_t> words;  // [n_rows][n_cols / 16]: the W2C layout (w2a8_math.h)
  std::vector<float> scales;    // [n_rows][n_cols / scale_block]
  int64_t n_cols = 0;
  int64_t n_rows = 0;
  int64_t scale_block = 0;      // the row (I2_S; TQ rows whose blocks share one d) or 256
};

// Checks the tensor's size and codes (code 3 is corrupt) and repacks it. A TQ tensor whose
// every row has one d in all its blocks (files made from a BitNet checkpoint) keeps one scale
// per row, as the CPU backend does (weights.cpp collapse_uniform_scales): the GEMV then sums
// the row in int32 and is bit-identical to the CPU's.
Result<W2cWeight> repack_w2c(GgmlType type, std::span<const uint8_t> bytes, int64_t n_cols, int64_t n_rows);

// A Q8_0 tensor split for the float GEMV (kernels.h FloatFormat::kQ8_0): the 34-byte blocks'
// int8 quants row-major (16-byte aligned rows of n_cols bytes) and their fp16 d as floats.
struct Q8Split {
  std::vector<int8_t> q;  // [n_rows][n_cols]
  std::vector<float> d;   // [n_rows][n_cols / 32]
};
Result<Q8Split> split_q8_0(std::span<const uint8_t> bytes, int64_t n_cols, int64_t n_rows);

}  // namespace bitnet::cuda
