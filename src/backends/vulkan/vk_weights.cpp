#include "backends/vulkan/vk_weights.h"

#include <fmt/format.h>

#include <cstring>

#include "core/fp16.h"
#include "quant/quant.h"

namespace bitnet::vulkan {

namespace {

// One-byte codes (rows of n_cols, a multiple of 128) -> the I2_S 128-group packing.
void pack_ternary(const uint8_t* codes, int64_t n, uint8_t* packed) {
  for (int64_t g = 0; g < n / 128; ++g) {
    const uint8_t* c = codes + g * 128;
    uint8_t* out = packed + g * 32;
    for (int j = 0; j < 32; ++j) {
      out[j] = static_cast<uint8_t>((c[j] << 6) | (c[j + 32] << 4) | (c[j + 64] << 2) | c[j + 96]);
    }
  }
}

// Host-side image of a weight before the split: per-row data and per-row scales.
struct HostImage {
  std::span<const uint8_t> data;  // n_rows * data_row_bytes
  std::vector<uint8_t> data_storage;
  std::vector<float> scales;      // n_rows * scales_per_row
  int64_t data_row_bytes = 0;
  int64_t scales_per_row = 0;
};

Status make_image(const hal::WeightDesc& d, DeviceWeight& w, HostImage& img) {
  const int64_t n = w.n_cols * w.n_rows;
  if (quant::is_ternary(d.type)) {
    if (w.n_cols % 128 != 0) {
      return unsupported(fmt::format("ternary tensor {} has rows of {} elements; the Vulkan kernels "
                                     "need a multiple of 128", d.name, w.n_cols));
    }
    auto rows = quant::decode_ternary_rows(d.type, d.bytes, w.n_cols, w.n_rows);
    if (!rows.ok()) return rows.status().with_context(d.name);
    if (rows->scale_block % 128 != 0) {
      return unsupported(fmt::format("tensor {}: scale blocks of {} are not whole 128-groups", d.name, rows->scale_block));
    }
    img.data_storage.resize(static_cast<size_t>(n / 4));
    pack_ternary(rows->codes.data(), n, img.data_storage.data());
    img.data_row_bytes = w.n_cols / 4;
    w.format = DeviceFormat::kTernary;
    w.scale_block = rows->scale_block;  // a per-tensor scale (I2_S) comes stored per row
    img.scales = std::move(rows->scales);
    img.scales_per_row = w.n_cols / w.scale_block;
    img.data = img.data_storage;
    return {};
  }
  if (w.n_rows == 1 || d.type == GgmlType::kF32) {
    if (w.n_rows == 1 && d.type != GgmlType::kF32) {
      if (!quant::can_dequantize(d.type)) {
        return unsupported(fmt::format("tensor {}: type {} is not supported by the Vulkan backend", d.name, ggml_type_name(d.type)));
      }
      img.data_storage.resize(static_cast<size_t>(n) * sizeof(float));
      BITNET_RETURN_IF_ERROR(quant::dequantize(d.type, d.bytes, n, reinterpret_cast<float*>(img.data_storage.data()))
                                 .with_context(d.name));
      img.data = img.data_storage;
    } else {
      img.data = d.bytes;
    }
    w.format = DeviceFormat::kF32;
    img.data_row_bytes = w.n_cols * 4;
    return {};
  }
  switch (d.type) {
    case GgmlType::kF16:
    case GgmlType::kBF16:
      w.format = d.type == GgmlType::kF16 ? DeviceFormat::kF16 : DeviceFormat::kBF16;
      img.data = d.bytes;
      img.data_row_bytes = w.n_cols * 2;
      return {};
    case GgmlType::kQ8_0: {
      if (w.n_cols % 32 != 0) return corrupt_file(fmt::format("Q8_0 tensor {} has rows of {} elements", d.name, w.n_cols));
      // 34-byte blocks: fp16 d, then 32 int8.
      const int64_t n_blocks = n / 32;
      img.data_storage.resize(static_cast<size_t>(n));
      img.scales.resize(static_cast<size_t>(n_blocks));
      for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* src = d.bytes.data() + b * 34;
        uint16_t h;
        std::memcpy(&h, src, 2);
        img.scales[static_cast<size_t>(b)] = fp16_to_fp32(h);
        std::memcpy(img.data_storage.data() + b * 32, src + 2, 32);
      }
      w.format = DeviceFormat::kQ8_0;
      img.data = img.data_storage;
      img.data_row_bytes = w.n_cols;
      img.scales_per_row = w.n_cols / 32;
      return {};
    }
    default:
      break;
  }
  switch (d.type) {
    case GgmlType::kQ4_0: w.format = DeviceFormat::kQ4_0; break;
    case GgmlType::kQ4_1: w.format = DeviceFormat::kQ4_1; break;
    case GgmlType::kQ5_0: w.format = DeviceFormat::kQ5_0; break;
    case GgmlType::kQ5_1: w.format = DeviceFormat::kQ5_1; break;
    case GgmlType::kQ2_K: w.format = DeviceFormat::kQ2_K; break;
    case GgmlType::kQ3_K: w.format = DeviceFormat::kQ3_K; break;
    case GgmlType::kQ4_K: w.format = DeviceFormat::kQ4_K; break;
    case GgmlType::kQ5_K: w.format = DeviceFormat::kQ5_K; break;
    case GgmlType::kQ6_K: w.format = DeviceFormat::kQ6_K; break;
    case GgmlType::kIQ4_NL: w.format = DeviceFormat::kIQ4_NL; break;
    case GgmlType::kIQ4_XS: w.format = DeviceFormat::kIQ4_XS; break;
    default:
      return unsupported(fmt::format("tensor {}: type {} is not supported by the Vulkan backend", d.name,
                                     ggml_type_name(d.type)));
  }
  // The file's rows, blocks unchanged (upload_weight checked the byte count; ggml_tensor_n_bytes
  // refuses rows that are not whole blocks).
  BITNET_ASSIGN_OR_RETURN(const uint64_t row_bytes, ggml_tensor_n_bytes(d.type, w.n_cols));
  img.data = d.bytes;
  img.data_row_bytes = static_cast<int64_t>(row_bytes);
  return {};
}

}  // namespace

uint64_t DeviceWeight::device_bytes() const {
  uint64_t total = 0;
  for (const WeightChunk& c : chunks) total += c.data.size() + c.scales.size();
  return total;
}

Result<DeviceWeight> upload_weight(Context& ctx, const hal::WeightDesc& d, uint64_t max_binding_bytes) {
  DeviceWeight w;
  w.type = d.type;
  w.n_cols = d.ne[0];
  w.n_rows = d.ne[1] * d.ne[2] * d.ne[3];
  if (w.n_cols <= 0 || w.n_rows <= 0) return invalid_argument(fmt::format("tensor {} is empty", d.name));
  BITNET_ASSIGN_OR_RETURN(const uint64_t file_bytes, ggml_tensor_n_bytes(d.type, w.n_cols * w.n_rows));
  if (d.bytes.size() < file_bytes) {
    return corrupt_file(fmt::format("tensor {} has {} bytes, {} expected", d.name, d.bytes.size(), file_bytes));
  }
  HostImage img;
  BITNET_RETURN_IF_ERROR(make_image(d, w, img));
  const int64_t scale_row_bytes = img.scales_per_row * 4;
  const int64_t row_bytes = std::max<int64_t>((img.data_row_bytes + 3) / 4 * 4, scale_row_bytes);
  const int64_t limit = static_cast<int64_t>(max_binding_bytes) - 16;  // room for padding
  if (row_bytes > limit) {
    return unsupported(fmt::format("tensor {}: one row of {} bytes exceeds the storage-buffer binding "
                                   "limit of {} bytes", d.name, row_bytes, max_binding_bytes));
  }
  const int64_t rows_per_chunk = limit / row_bytes;
  const int64_t words_per_row = (img.data_row_bytes + 3) / 4;
  for (int64_t r0 = 0; r0 < w.n_rows; r0 += rows_per_chunk) {
    WeightChunk c;
    c.row0 = r0;
    c.n_rows = std::min(rows_per_chunk, w.n_rows - r0);
    // Word-interleaved: word j of row r at j * n_rows + r (rows padded to whole words).
    std::vector<uint32_t> words(static_cast<size_t>(words_per_row * c.n_rows), 0);
    for (int64_t r = 0; r < c.n_rows; ++r) {
      const uint8_t* row = img.data.data() + (r0 + r) * img.data_row_bytes;
      for (int64_t j = 0; j < words_per_row; ++j) {
        uint32_t word = 0;
        std::memcpy(&word, row + 4 * j, static_cast<size_t>(std::min<int64_t>(4, img.data_row_bytes - 4 * j)));
        words[static_cast<size_t>(j * c.n_rows + r)] = word;
      }
    }
    const std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(words.data()), words.size() * 4);
    BITNET_ASSIGN_OR_RETURN(c.data, ctx.create_buffer(data.size(), MemoryKind::kDevice));
    BITNET_RETURN_IF_ERROR(ctx.upload(c.data, 0, data));
    if (img.scales_per_row > 0) {
      std::vector<float> scales(static_cast<size_t>(img.scales_per_row * c.n_rows));
      for (int64_t r = 0; r < c.n_rows; ++r) {
        for (int64_t b = 0; b < img.scales_per_row; ++b) {
          scales[static_cast<size_t>(b * c.n_rows + r)] = img.scales[static_cast<size_t>((r0 + r) * img.scales_per_row + b)];
        }
      }
      const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(scales.data()), scales.size() * 4);
      BITNET_ASSIGN_OR_RETURN(c.scales, ctx.create_buffer(bytes.size(), MemoryKind::kDevice));
      BITNET_RETURN_IF_ERROR(ctx.upload(c.scales, 0, bytes));
    }
    w.chunks.push_back(std::move(c));
  }
  return w;
}

}  // namespace bitnet::vulkan
