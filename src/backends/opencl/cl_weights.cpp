#include "backends/opencl/cl_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/fp16.h"
#include "quant/quant.h"

namespace bitnet::opencl {

namespace {

Status write(cl_command_queue queue, const DeviceBuffer& dst, const void* src, size_t n_bytes,
             std::string_view what) {
  return cl_status(clEnqueueWriteBuffer(queue, dst.get(), CL_TRUE, 0, n_bytes, src, 0, nullptr, nullptr),
                   fmt::format("uploading {}", what));
}

// Rows per chunk so that each of a chunk's buffers fits the largest allocation.
Result<int64_t> rows_per_chunk(const hal::WeightDesc& d, int64_t n_rows, uint64_t row_bytes,
                               uint64_t scale_row_bytes, uint64_t max_alloc) {
  const uint64_t widest = std::max(row_bytes, scale_row_bytes);
  if (widest > max_alloc) {
    return out_of_memory(fmt::format("tensor {}: one row of {} bytes exceeds the device's largest buffer ({} bytes)",
                                     d.name, widest, max_alloc));
  }
  return std::min<int64_t>(n_rows, static_cast<int64_t>(max_alloc / widest));
}

// Splits rows into chunks; fill(chunk, data_host, scales_host) gives the host bytes of rows
// [row0, row0 + n) through a callback so that large float weights are never copied on the host.
template <class Fill>
Status upload_chunks(DeviceWeight& w, const hal::WeightDesc& d, uint64_t row_bytes, uint64_t scale_row_bytes,
                     ClAllocator& allocator, cl_command_queue queue, Fill fill) {
  BITNET_ASSIGN_OR_RETURN(const int64_t per_chunk,
                          rows_per_chunk(d, w.n_rows, row_bytes, scale_row_bytes, allocator.max_alloc_bytes()));
  for (int64_t row0 = 0; row0 < w.n_rows; row0 += per_chunk) {
    WeightChunk c;
    c.row0 = row0;
    c.n_rows = std::min(per_chunk, w.n_rows - row0);
    const std::string what = fmt::format("tensor {} rows {}..{}", d.name, row0, row0 + c.n_rows);
    const auto [data, scales] = fill(row0, c.n_rows);
    BITNET_ASSIGN_OR_RETURN(c.data, allocator.create(row_bytes * c.n_rows, what));
    BITNET_RETURN_IF_ERROR(write(queue, c.data, data, row_bytes * c.n_rows, what));
    if (scale_row_bytes > 0) {
      BITNET_ASSIGN_OR_RETURN(c.scales, allocator.create(scale_row_bytes * c.n_rows, what));
      BITNET_RETURN_IF_ERROR(write(queue, c.scales, scales, scale_row_bytes * c.n_rows, what));
    }
    w.n_bytes += (row_bytes + scale_row_bytes) * c.n_rows;
    w.chunks.push_back(std::move(c));
  }
  return {};
}

struct HostPtrs {
  const void* data;
  const void* scales;
};

Status upload_ternary(DeviceWeight& w, const hal::WeightDesc& d, ClAllocator& allocator, cl_command_queue queue) {
  const int64_t n = w.n_cols * w.n_rows;
  if (w.n_cols % 16 != 0) {
    return unsupported(fmt::format("ternary tensor {} has rows of {} elements; the OpenCL kernels need a multiple of 16",
                                   d.name, w.n_cols));
  }
  // One scale per block of a row, as the CPU backend: a per-tensor scale (I2_S) per row.
  auto rows = quant::decode_ternary_rows(d.type, d.bytes, w.n_cols, w.n_rows);
  if (!rows.ok()) return rows.status().with_context(d.name);
  const int64_t row_block = rows->scale_block;
  if (row_block % 16 != 0) {
    return unsupported(fmt::format("tensor {}: scale blocks of {} are not whole words", d.name, row_block));
  }
  const std::vector<uint8_t>& codes = rows->codes;
  const std::vector<float>& scales = rows->scales;
  w.words_per_block = row_block / 16;
  std::vector<uint32_t> words(static_cast<size_t>(n / 16));
  pack_ternary_words(codes.data(), w.n_rows, w.n_cols, words.data());
  const uint64_t row_bytes = static_cast<uint64_t>(w.n_cols / 16) * 4;
  const uint64_t scale_row_bytes = static_cast<uint64_t>(w.n_cols / row_block) * 4;
  return upload_chunks(w, d, row_bytes, scale_row_bytes, allocator, queue, [&](int64_t row0, int64_t) {
    return HostPtrs{words.data() + row0 * (w.n_cols / 16), scales.data() + row0 * (w.n_cols / row_block)};
  });
}

Status upload_q8_0(DeviceWeight& w, const hal::WeightDesc& d, ClAllocator& allocator, cl_command_queue queue) {
  if (w.n_cols % 32 != 0) return corrupt_file(fmt::format("tensor {}: Q8_0 rows of {} elements", d.name, w.n_cols));
  // ggml block_q8_0: fp16 d, then 32 int8 quants (34 bytes); value = q * d.
  const int64_t n_blocks = w.n_cols * w.n_rows / 32;
  std::vector<int8_t> qs(static_cast<size_t>(n_blocks * 32));
  std::vector<float> ds(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = d.bytes.data() + b * 34;
    uint16_t h;
    std::memcpy(&h, block, 2);
    ds[static_cast<size_t>(b)] = fp16_to_fp32(h);
    std::memcpy(qs.data() + b * 32, block + 2, 32);
  }
  const uint64_t row_bytes = static_cast<uint64_t>(w.n_cols);
  const uint64_t scale_row_bytes = static_cast<uint64_t>(w.n_cols / 32) * 4;
  return upload_chunks(w, d, row_bytes, scale_row_bytes, allocator, queue, [&](int64_t row0, int64_t) {
    return HostPtrs{qs.data() + row0 * w.n_cols, ds.data() + row0 * (w.n_cols / 32)};
  });
}

}  // namespace

std::string_view format_name(DeviceFormat format) {
  switch (format) {
    case DeviceFormat::kF32: return "f32";
    case DeviceFormat::kF16: return "f16";
    case DeviceFormat::kBF16: return "bf16";
    case DeviceFormat::kQ8_0: return "q8_0";
    case DeviceFormat::kTernary: return "w2a8";
    case DeviceFormat::kQ4_0: return "q4_0";
    case DeviceFormat::kQ4_1: return "q4_1";
    case DeviceFormat::kQ5_0: return "q5_0";
    case DeviceFormat::kQ5_1: return "q5_1";
    case DeviceFormat::kQ2_K: return "q2_k";
    case DeviceFormat::kQ3_K: return "q3_k";
    case DeviceFormat::kQ4_K: return "q4_k";
    case DeviceFormat::kQ5_K: return "q5_k";
    case DeviceFormat::kQ6_K: return "q6_k";
    case DeviceFormat::kIQ4_NL: return "iq4_nl";
    case DeviceFormat::kIQ4_XS: return "iq4_xs";
  }
  return "unknown";
}

std::optional<DeviceFormat> block_format(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return DeviceFormat::kQ4_0;
    case GgmlType::kQ4_1: return DeviceFormat::kQ4_1;
    case GgmlType::kQ5_0: return DeviceFormat::kQ5_0;
    case GgmlType::kQ5_1: return DeviceFormat::kQ5_1;
    case GgmlType::kQ2_K: return DeviceFormat::kQ2_K;
    case GgmlType::kQ3_K: return DeviceFormat::kQ3_K;
    case GgmlType::kQ4_K: return DeviceFormat::kQ4_K;
    case GgmlType::kQ5_K: return DeviceFormat::kQ5_K;
    case GgmlType::kQ6_K: return DeviceFormat::kQ6_K;
    case GgmlType::kIQ4_NL: return DeviceFormat::kIQ4_NL;
    case GgmlType::kIQ4_XS: return DeviceFormat::kIQ4_XS;
    default: return std::nullopt;
  }
}

void pack_ternary_words(const uint8_t* codes, int64_t n_rows, int64_t n_cols, uint32_t* words) {
  const int64_t n_words = n_rows * n_cols / 16;  // words never straddle rows
  for (int64_t j = 0; j < n_words; ++j) {
    const uint8_t* c = codes + j * 16;
    uint32_t word = 0;
    for (int i = 0; i < 4; ++i) {
      for (int b = 0; b < 4; ++b) word |= static_cast<uint32_t>(c[4 * i + b] & 3u) << (8 * b + 2 * i);
    }
    words[j] = word;
  }
}

Result<DeviceWeight> upload_weight(const hal::WeightDesc& d, ClAllocator& allocator, cl_command_queue queue) {
  DeviceWeight w;
  w.name = d.name;
  w.type = d.type;
  w.n_cols = d.ne[0];
  w.n_rows = d.ne[1] * d.ne[2] * d.ne[3];
  if (w.n_cols <= 0 || w.n_rows <= 0) return unsupported(fmt::format("tensor {} is empty", d.name));
  if (w.n_cols > INT32_MAX || w.n_rows > INT32_MAX) {
    return unsupported(fmt::format("tensor {} has more than 2^31 rows or columns", d.name));
  }
  if (quant::is_ternary(d.type)) {
    w.format = DeviceFormat::kTernary;
    BITNET_RETURN_IF_ERROR(upload_ternary(w, d, allocator, queue));
    return w;
  }
  if (!quant::can_dequantize(d.type)) {
    return unsupported(fmt::format("tensor {}: weight type {} is not supported by the OpenCL backend", d.name,
                                   ggml_type_name(d.type)));
  }
  BITNET_ASSIGN_OR_RETURN(const uint64_t row_bytes, ggml_tensor_n_bytes(d.type, w.n_cols));
  if (d.bytes.size() < row_bytes * static_cast<uint64_t>(w.n_rows)) {
    return corrupt_file(fmt::format("tensor {}: {} bytes for {} rows of {} bytes", d.name, d.bytes.size(), w.n_rows, row_bytes));
  }
  if (w.n_rows == 1 && d.type != GgmlType::kF32) {
    // 1-D weights (norms, scales): dequantized once, as the CPU backend does.
    std::vector<float> values(static_cast<size_t>(w.n_cols));
    BITNET_RETURN_IF_ERROR(quant::dequantize(d.type, d.bytes.subspan(0, row_bytes), w.n_cols, values.data())
                               .with_context(d.name));
    w.format = DeviceFormat::kF32;
    BITNET_RETURN_IF_ERROR(upload_chunks(w, d, values.size() * 4, 0, allocator, queue, [&](int64_t, int64_t) {
      return HostPtrs{values.data(), nullptr};
    }));
    return w;
  }
  switch (d.type) {
    case GgmlType::kF32: w.format = DeviceFormat::kF32; break;
    case GgmlType::kF16: w.format = DeviceFormat::kF16; break;
    case GgmlType::kBF16: w.format = DeviceFormat::kBF16; break;
    case GgmlType::kQ8_0:
      w.format = DeviceFormat::kQ8_0;
      BITNET_RETURN_IF_ERROR(upload_q8_0(w, d, allocator, queue));
      return w;
    default: {
      const std::optional<DeviceFormat> f = block_format(d.type);
      if (!f) {
        return unsupported(fmt::format("tensor {}: weight type {} is not supported by the OpenCL backend", d.name,
                                       ggml_type_name(d.type)));
      }
      // ggml_tensor_n_bytes above refused rows that are not whole blocks.
      w.format = *f;
      break;
    }
  }
  // F32/F16/BF16 and the block formats: the file's rows as they are, uploaded in place from the mapping.
  BITNET_RETURN_IF_ERROR(upload_chunks(w, d, row_bytes, 0, allocator, queue, [&](int64_t row0, int64_t) {
    return HostPtrs{d.bytes.data() + row0 * static_cast<int64_t>(row_bytes), nullptr};
  }));
  return w;
}

}  // namespace bitnet::opencl
