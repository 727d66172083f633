#include "quant/quant.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/fp16.h"
#include "quant/bytes.h"
#include "quant/i2s.h"
#include "quant/iq4.h"
#include "quant/q2_k_q3_k.h"
#include "quant/q4_k_q5_k.h"
#include "quant/q4_q5.h"
#include "quant/q6_k.h"
#include "quant/q8_0.h"
#include "quant/q8_k.h"
#include "quant/tq.h"

namespace bitnet::quant {
namespace {

bool is_tq(GgmlType type) { return type == GgmlType::kTQ1_0 || type == GgmlType::kTQ2_0; }

// F32/F16/BF16 and the ternary formats, which have paths of their own both ways.
bool is_float_or_ternary(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 ||
         is_ternary(type);
}

// ggml's block formats with a scalar reference here, as one-block functions (elements and
// bytes per block come from gguf/types). A null function is one ggml's reference does not have
// (Q8_1 is never dequantized).
struct BlockCodec {
  GgmlType type;
  void (*dequantize)(const uint8_t* src, float* y);
  void (*quantize)(const float* x, uint8_t* dst);
};

constexpr BlockCodec kBlockCodecs[] = {
    {GgmlType::kQ4_0, q4_0_dequantize_block, q4_0_quantize_block},
    {GgmlType::kQ4_1, q4_1_dequantize_block, q4_1_quantize_block},
    {GgmlType::kQ5_0, q5_0_dequantize_block, q5_0_quantize_block},
    {GgmlType::kQ5_1, q5_1_dequantize_block, q5_1_quantize_block},
    {GgmlType::kQ8_0, q8_0_dequantize_block, q8_0_quantize_block},
    {GgmlType::kQ8_1, nullptr, q8_1_quantize_block},
    {GgmlType::kQ2_K, q2_K_dequantize_block, q2_K_quantize_block},
    {GgmlType::kQ3_K, q3_K_dequantize_block, q3_K_quantize_block},
    {GgmlType::kQ4_K, q4_K_dequantize_block, q4_K_quantize_block},
    {GgmlType::kQ5_K, q5_K_dequantize_block, q5_K_quantize_block},
    {GgmlType::kQ6_K, q6_K_dequantize_block, q6_K_quantize_block},
    {GgmlType::kQ8_K, q8_K_dequantize_block, q8_K_quantize_block},
    {GgmlType::kIQ4_NL, iq4_nl_dequantize_block, iq4_nl_quantize_block},
    {GgmlType::kIQ4_XS, iq4_xs_dequantize_block, iq4_xs_quantize_block},
};

const BlockCodec* find_codec(GgmlType type) {
  for (const BlockCodec& c : kBlockCodecs) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

// Every codec type is in gguf/types' table.
GgmlTypeTraits traits_of(GgmlType type) {
  return *ggml_type_traits(static_cast<uint32_t>(type));
}

// Elements the layout packs together: n (or a row) must be a multiple of it.
int64_t layout_block(GgmlType type) {
  if (find_codec(type) != nullptr) return traits_of(type).block_elems;
  switch (type) {
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0: return kTqBlockElems;
    case GgmlType::kI2_S: return kI2sGroupElems;
    default: return 1;
  }
}

// n against the type's layout: n >= 0, whole blocks, and I2_S needs at least one group
// (its scale belongs to a non-empty tensor). bitnet.cpp's quantizer silently drops a partial
// last group (its bytes stay 0, i.e. code 0 = -1), so a partial group is refused here.
Status check_elems(GgmlType type, int64_t n) {
  if (n < 0) return invalid_argument(fmt::format("negative element count {}", n));
  const int64_t block = layout_block(type);
  if (n % block != 0 || (type == GgmlType::kI2_S && n == 0)) {
    return unsupported(fmt::format("{} needs a {}multiple of {} elements, got {}",
                                   ggml_type_name(type), type == GgmlType::kI2_S ? "positive " : "",
                                   block, n));
  }
  return Status::ok_status();
}

Result<uint64_t> expected_bytes(GgmlType type, int64_t n) {
  BITNET_RETURN_IF_ERROR(check_elems(type, n));
  return ggml_tensor_n_bytes(type, n);
}

Status check_src(GgmlType type, std::span<const uint8_t> src, int64_t n) {
  BITNET_ASSIGN_OR_RETURN(const uint64_t want, expected_bytes(type, n));
  if (src.size() != want) {
    return invalid_argument(fmt::format("{} tensor of {} elements is {} bytes, got {}",
                                        ggml_type_name(type), n, want, src.size()));
  }
  return Status::ok_status();
}

Status check_ternary(GgmlType type) {
  if (!is_ternary(type)) {
    return unsupported(fmt::format("{} is not a ternary type", ggml_type_name(type)));
  }
  return Status::ok_status();
}

Status check_finite(const float* x, int64_t n, GgmlType type) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      return invalid_argument(
          fmt::format("cannot quantize {} to {}: element {}", x[i], ggml_type_name(type), i));
    }
  }
  return Status::ok_status();
}

Status i2s_decode(std::span<const uint8_t> src, int64_t n, uint8_t* codes, float* scale) {
  for (int64_t g = 0; g < n / kI2sGroupElems; ++g) {
    uint8_t* cg = codes + g * kI2sGroupElems;
    i2s_unpack_group(src.data() + g * kI2sGroupBytes, cg);
    for (int64_t j = 0; j < kI2sGroupElems; ++j) {
      if (cg[j] > 2) {
        return corrupt_file(
            fmt::format("I2_S code 3 (unused) at element {}", g * kI2sGroupElems + j));
      }
    }
  }
  *scale = load_f32(src.data() + n / 4);
  return Status::ok_status();
}

Status i2s_dequantize(std::span<const uint8_t> src, int64_t n, float* dst) {
  const float scale = load_f32(src.data() + n / 4);
  uint8_t codes[kI2sGroupElems];
  for (int64_t g = 0; g < n / kI2sGroupElems; ++g) {
    i2s_unpack_group(src.data() + g * kI2sGroupBytes, codes);
    for (int64_t j = 0; j < kI2sGroupElems; ++j) {
      if (codes[j] > 2) {
        return corrupt_file(
            fmt::format("I2_S code 3 (unused) at element {}", g * kI2sGroupElems + j));
      }
      dst[g * kI2sGroupElems + j] = static_cast<float>(codes[j] - 1) * scale;
    }
  }
  return Status::ok_status();
}

}  // namespace

bool is_ternary(GgmlType type) { return type == GgmlType::kI2_S || is_tq(type); }

bool can_dequantize(GgmlType type) {
  if (is_float_or_ternary(type)) return true;
  const BlockCodec* c = find_codec(type);
  return c != nullptr && c->dequantize != nullptr;
}

bool can_quantize(GgmlType type) {
  if (is_float_or_ternary(type)) return true;
  const BlockCodec* c = find_codec(type);
  return c != nullptr && c->quantize != nullptr;
}

Status dequantize(GgmlType type, std::span<const uint8_t> src, int64_t n, float* dst) {
  if (!can_dequantize(type)) {
    return unsupported(fmt::format("cannot dequantize {}", ggml_type_name(type)));
  }
  BITNET_RETURN_IF_ERROR(check_src(type, src, n));
  const uint8_t* p = src.data();
  switch (type) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(dst, p, static_cast<size_t>(n) * sizeof(float));
      return Status::ok_status();
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(p + 2 * i));
      return Status::ok_status();
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(p + 2 * i));
      return Status::ok_status();
    case GgmlType::kI2_S: return i2s_dequantize(src, n, dst);
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0: return tq_dequantize(type, p, n, dst);
    default: {
      const BlockCodec& c = *find_codec(type);
      const GgmlTypeTraits t = traits_of(type);
      for (int64_t b = 0; b < n / t.block_elems; ++b) {
        c.dequantize(p + b * t.block_bytes, dst + b * t.block_elems);
      }
      return Status::ok_status();
    }
  }
}

int64_t ternary_scale_block(GgmlType type, int64_t n) {
  if (type == GgmlType::kI2_S) return n;
  return is_tq(type) ? kTqBlockElems : 0;
}

Status ternary_decode(GgmlType type, std::span<const uint8_t> src, int64_t n, uint8_t* codes,
                      float* scales) {
  BITNET_RETURN_IF_ERROR(check_ternary(type));
  BITNET_RETURN_IF_ERROR(check_src(type, src, n));
  if (type == GgmlType::kI2_S) return i2s_decode(src, n, codes, scales);
  return tq_decode(type, src.data(), n, codes, scales);
}

Result<std::vector<uint8_t>> quantize(GgmlType type, const float* src, int64_t n_rows,
                                      int64_t n_per_row) {
  if (!can_quantize(type)) {
    return unsupported(fmt::format("cannot quantize to {}", ggml_type_name(type)));
  }
  if (n_rows < 0 || n_per_row < 0) {
    return invalid_argument(fmt::format("negative shape {} x {}", n_rows, n_per_row));
  }
  if (n_per_row > 0 && n_rows > std::numeric_limits<int64_t>::max() / n_per_row) {
    return invalid_argument(fmt::format("{} x {} elements overflow", n_rows, n_per_row));
  }
  const int64_t n = n_rows * n_per_row;
  // Rows are whole blocks, as ggml requires: a row's bytes never share a block with the next.
  if (n_per_row % layout_block(type) != 0) {
    return unsupported(fmt::format("{} rows need a multiple of {} elements, got {}",
                                   ggml_type_name(type), layout_block(type), n_per_row));
  }
  BITNET_ASSIGN_OR_RETURN(const uint64_t n_bytes, expected_bytes(type, n));
  std::vector<uint8_t> dst(n_bytes);
  uint8_t* out = dst.data();
  switch (type) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) store_u16(out + 2 * i, fp32_to_fp16(src[i]));
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) store_u16(out + 2 * i, fp32_to_bf16(src[i]));
      break;
    case GgmlType::kI2_S:
      BITNET_RETURN_IF_ERROR(check_finite(src, n, type));
      i2s_quantize(src, n, out);
      break;
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0:
      BITNET_RETURN_IF_ERROR(check_finite(src, n, type));
      tq_quantize(type, src, n, out);
      break;
    default: {
      BITNET_RETURN_IF_ERROR(check_finite(src, n, type));
      const BlockCodec& c = *find_codec(type);
      const GgmlTypeTraits t = traits_of(type);
      const int64_t row_blocks = n_per_row / t.block_elems;
      for (int64_t b = 0; b < n / t.block_elems; ++b) {
        uint8_t* blk = out + b * t.block_bytes;
        if (type == GgmlType::kIQ4_NL && b % row_blocks != 0) {
          // ggml leaves an all-zero block's codes as the previous block's (iq4.h).
          std::memcpy(blk + 2, blk + 2 - t.block_bytes, 16);
        }
        c.quantize(src + b * t.block_elems, blk);
      }
      break;
    }
  }
  return dst;
}

Result<std::vector<uint8_t>> ternary_encode(GgmlType type, const uint8_t* codes,
                                            const float* scales, int64_t n) {
  BITNET_RETURN_IF_ERROR(check_ternary(type));
  BITNET_ASSIGN_OR_RETURN(const uint64_t n_bytes, expected_bytes(type, n));
  for (int64_t i = 0; i < n; ++i) {
    if (codes[i] > 2) {
      return invalid_argument(
          fmt::format("ternary code {} at element {} (want 0, 1 or 2)", codes[i], i));
    }
  }
  const int64_t n_scales = type == GgmlType::kI2_S ? 1 : n / kTqBlockElems;
  for (int64_t b = 0; b < n_scales; ++b) {
    const float s = scales[b];
    if (!std::isfinite(s) || s < 0.0f) {
      return invalid_argument(fmt::format("scale {} of block {}: want finite and >= 0", s, b));
    }
    if (type != GgmlType::kI2_S && fp16_to_fp32(fp32_to_fp16(s)) != s) {
      return invalid_argument(
          fmt::format("scale {} of block {} is not exact in fp16 ({} would be stored)", s, b,
                      fp16_to_fp32(fp32_to_fp16(s))));
    }
  }
  std::vector<uint8_t> dst(n_bytes);
  if (type == GgmlType::kI2_S) {
    for (int64_t g = 0; g < n / kI2sGroupElems; ++g) {
      i2s_pack_group(codes + g * kI2sGroupElems, dst.data() + g * kI2sGroupBytes);
    }
    store_f32(dst.data() + n / 4, scales[0]);  // the 28 pad bytes stay zero
  } else {
    tq_encode(type, codes, scales, n, dst.data());
  }
  return dst;
}

Result<TernaryRows> decode_ternary_rows(GgmlType type, std::span<const uint8_t> src,
                                        int64_t n_cols, int64_t n_rows) {
  const int64_t n = n_cols * n_rows;
  TernaryRows t;
  t.codes.resize(static_cast<size_t>(n));
  const int64_t block = ternary_scale_block(type, n);
  if (block <= 0) return unsupported(fmt::format("type {} is not ternary", ggml_type_name(type)));
  std::vector<float> scales(static_cast<size_t>(n / block));
  BITNET_RETURN_IF_ERROR(ternary_decode(type, src, n, t.codes.data(), scales.data()));
  if (block == n) {
    t.scale_block = n_cols;
    t.scales.assign(static_cast<size_t>(n_rows), scales[0]);
  } else {
    if (n_cols % block != 0) {
      return unsupported(fmt::format("scale blocks of {} do not tile rows of {}", block, n_cols));
    }
    t.scale_block = block;
    t.scales = std::move(scales);
  }
  return t;
}

std::optional<GgmlType> vec_dot_type(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
    case GgmlType::kIQ4_NL: return GgmlType::kQ8_0;
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1: return GgmlType::kQ8_1;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kIQ4_XS: return GgmlType::kQ8_K;
    default: return std::nullopt;
  }
}

VecDotFn vec_dot_fn(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return vec_dot_q4_0_q8_0;
    case GgmlType::kQ4_1: return vec_dot_q4_1_q8_1;
    case GgmlType::kQ5_0: return vec_dot_q5_0_q8_0;
    case GgmlType::kQ5_1: return vec_dot_q5_1_q8_1;
    case GgmlType::kQ8_0: return vec_dot_q8_0_q8_0;
    case GgmlType::kQ2_K: return vec_dot_q2_K_q8_K;
    case GgmlType::kQ3_K: return vec_dot_q3_K_q8_K;
    case GgmlType::kQ4_K: return vec_dot_q4_K_q8_K;
    case GgmlType::kQ5_K: return vec_dot_q5_K_q8_K;
    case GgmlType::kQ6_K: return vec_dot_q6_K_q8_K;
    case GgmlType::kIQ4_NL: return vec_dot_iq4_nl_q8_0;
    case GgmlType::kIQ4_XS: return vec_dot_iq4_xs_q8_K;
    default: return nullptr;
  }
}

Result<float> vec_dot(GgmlType type, std::span<const uint8_t> w, std::span<const uint8_t> a,
                      int64_t n) {
  const std::optional<GgmlType> a_type = vec_dot_type(type);
  const VecDotFn dot = vec_dot_fn(type);
  if (!a_type || dot == nullptr) {
    return unsupported(fmt::format("no reference dot product for {}", ggml_type_name(type)));
  }
  BITNET_RETURN_IF_ERROR(check_src(type, w, n));
  BITNET_RETURN_IF_ERROR(check_src(*a_type, a, n));
  return dot(n, w.data(), a.data());
}

}  // namespace bitnet::quant
