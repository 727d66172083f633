// Weights resident on the device, converted once at load into the layouts the shaders read:
//   F32            float rows as in the file
//   F16, BF16      the file's 16-bit rows, read as 32-bit words holding two elements
//   Q8_0           int8 rows (4 per word) + one float scale per 32 elements
//   I2_S/TQ2_0/TQ1_0  ternary codes (w + 1) in the I2_S 128-group layout (byte j of a group:
//                  elements j, j+32, j+64, j+96 in bits 7-6 .. 1-0), n_cols / 16 words per
//                  row, + float scales per row and scale block (I2_S: the tensor scale per row)
//   Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS
//                  the file's blocks as they are (each row is whole blocks), dequantized in
//                  the shaders (weight_fetch.glsl)
//   1-D tensors    (norms, .scale) dequantized to F32 at load, as the CPU backend does.
// Every chunk is word-interleaved: its rows padded to whole 32-bit words, word j of row r at
// index j * n_rows + r, scale b of row r at b * n_rows + r, so that the matmul shaders (one
// invocation per output row) load contiguous words across a subgroup. A 1-row tensor is
// therefore just its words in order.
// A tensor whose rows do not fit one storage-buffer binding is split into row chunks, each
// with its own buffers; shaders run once per chunk.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/vulkan/vk_context.h"
#include "hal/ops.h"

namespace bitnet::vulkan {

enum class DeviceFormat {
  kF32, kF16, kBF16, kQ8_0, kTernary,
  // llama.cpp's block formats: the file's bytes, rows padded to whole words (no scales).
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_NL, kIQ4_XS,
};

struct WeightChunk {
  int64_t row0 = 0;
  int64_t n_rows = 0;
  Buffer data;
  Buffer scales;  // Q8_0 and ternary; empty otherwise
};

struct DeviceWeight {
  GgmlType type = GgmlType::kF32;  // the file's type
  DeviceFormat format = DeviceFormat::kF32;
  int64_t n_cols = 0;
  int64_t n_rows = 0;
  int64_t scale_block = 0;  // ternary: elements per scale (a multiple of 128)
  std::vector<WeightChunk> chunks;
  uint64_t device_bytes() const;
};

// Converts and uploads one weight; no chunk's buffer exceeds max_binding_bytes.
Result<DeviceWeight> upload_weight(Context& ctx, const hal::WeightDesc& desc, uint64_t max_binding_bytes);

}  // namespace bitnet::vulkan
