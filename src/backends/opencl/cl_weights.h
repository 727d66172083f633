// Weights resident on the device, converted once at load into the layouts the kernels read
// (see kernels/matmul_float.cl and kernels/matmul_w2a8.cl). A weight larger than the device's
// largest buffer is split into row chunks, each its own buffer; kernels run once per chunk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/opencl/cl_buffer_pool.h"
#include "hal/ops.h"

namespace bitnet::opencl {

enum class DeviceFormat : uint8_t {
  kF32,      // float; also every 1-D weight (norms, scales), dequantized at load
  kF16,      // half, read with vload_half
  kBF16,     // ushort, widened by a shift
  kQ8_0,     // int8 quants in `data`, one float scale per 32 in `scales`
  kTernary,  // 2-bit codes, 16 per uint32 word, in `data`; float scales per block in `scales`
  // llama.cpp's block formats: the file's blocks, unchanged, in `data` (no `scales`); the
  // kernels (kernels/matmul_quant.cl) dequantize them.
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_NL, kIQ4_XS,
};

struct WeightChunk {
  int64_t row0 = 0;
  int64_t n_rows = 0;
  DeviceBuffer data;
  DeviceBuffer scales;  // kQ8_0 and kTernary only
};

struct DeviceWeight {
  std::string name;
  GgmlType type = GgmlType::kF32;  // the file's type
  DeviceFormat format = DeviceFormat::kF32;
  int64_t n_cols = 0;              // ne[0]
  int64_t n_rows = 0;              // ne[1] * ne[2] * ne[3]
  int64_t words_per_block = 0;     // kTernary: words (16 elements) per scale block
  std::vector<WeightChunk> chunks; // rows [row0, row0 + n_rows) each, in order
  uint64_t n_bytes = 0;            // device bytes

  bool is_ternary() const { return format == DeviceFormat::kTernary; }
};

// "f32", "f16", "bf16", "q8_0", "q4_0", ..., "iq4_xs" (kernel name suffixes), "w2a8" for ternary.
std::string_view format_name(DeviceFormat format);

// The device format that keeps `type`'s file blocks as they are (Q4_0 .. IQ4_XS), if any.
std::optional<DeviceFormat> block_format(GgmlType type);

// Converts and uploads one weight (blocking writes on `queue`). Unsupported types are a
// kUnsupported Status naming the tensor.
Result<DeviceWeight> upload_weight(const hal::WeightDesc& desc, ClAllocator& allocator, cl_command_queue queue);

// Packs one-byte codes (n_rows x n_cols, each 0..2, n_cols a multiple of 16) into the device
// layout: word j of a row holds element 16j + 4i + b in byte b, bits 2i..2i+1.
void pack_ternary_words(const uint8_t* codes, int64_t n_rows, int64_t n_cols, uint32_t* words);

}  // namespace bitnet::opencl
