#include "gguf/types.h"

#include <array>
#include <limits>
#include <string>

namespace bitnet {
namespace {

struct TypeEntry {
  GgmlType type;
  GgmlTypeTraits traits;
};

// Block sizes from ggml's type_traits (ggml.c / ggml-common.h block structs); 36-39 from
// microsoft/BitNet's llama.cpp fork, which declares them with block 1 and type size 1.
// Q8_1 is 2 halves + 32 quants = 36 bytes: gguf-py's table still says 40 (the pre-2024
// float d, float s block), ggml's static_assert says 36.
constexpr std::array<TypeEntry, 27> kTypes = {{
    {GgmlType::kF32, {"f32", 1, 4}},
    {GgmlType::kF16, {"f16", 1, 2}},
    {GgmlType::kQ4_0, {"q4_0", 32, 18}},     // half d + 16 bytes of nibbles
    {GgmlType::kQ4_1, {"q4_1", 32, 20}},     // half d, half m + 16
    {GgmlType::kQ5_0, {"q5_0", 32, 22}},     // half d + 4 (qh) + 16
    {GgmlType::kQ5_1, {"q5_1", 32, 24}},     // half d, half m + 4 + 16
    {GgmlType::kQ8_0, {"q8_0", 32, 34}},     // half d + 32 int8
    {GgmlType::kQ8_1, {"q8_1", 32, 36}},     // half d, half s + 32 int8
    {GgmlType::kQ2_K, {"q2_K", 256, 84}},    // 16 scales + 64 qs + 2 halves
    {GgmlType::kQ3_K, {"q3_K", 256, 110}},   // 32 hmask + 64 qs + 12 scales + half
    {GgmlType::kQ4_K, {"q4_K", 256, 144}},   // 2 halves + 12 scales + 128 qs
    {GgmlType::kQ5_K, {"q5_K", 256, 176}},   // 2 halves + 12 scales + 32 qh + 128 qs
    {GgmlType::kQ6_K, {"q6_K", 256, 210}},   // 128 ql + 64 qh + 16 scales + half
    {GgmlType::kQ8_K, {"q8_K", 256, 292}},   // float d + 256 int8 + 16 int16 bsums
    {GgmlType::kIQ4_NL, {"iq4_nl", 32, 18}}, // half d + 16 bytes of table indices
    {GgmlType::kIQ4_XS, {"iq4_xs", 256, 136}},  // half d + 2 (scales_h) + 4 (scales_l) + 128
    {GgmlType::kI8, {"i8", 1, 1}},
    {GgmlType::kI16, {"i16", 1, 2}},
    {GgmlType::kI32, {"i32", 1, 4}},
    {GgmlType::kI64, {"i64", 1, 8}},
    {GgmlType::kF64, {"f64", 1, 8}},
    {GgmlType::kBF16, {"bf16", 1, 2}},
    {GgmlType::kTQ1_0, {"tq1_0", 256, 54}},  // 48 qs + 4 qh + half d
    {GgmlType::kTQ2_0, {"tq2_0", 256, 66}},  // 64 qs + half d
    {GgmlType::kI2_S, {"i2_s", 1, 1}},       // sizes special-cased below
    {GgmlType::kTL1, {"tl1", 1, 1}},
    {GgmlType::kTL2, {"tl2", 1, 1}},
}};

std::string type_label(GgmlType type) {
  return std::string(ggml_type_name(type));
}

// Checked a * b for non-negative a, b.
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id) {
  for (const TypeEntry& e : kTypes) {
    if (static_cast<uint32_t>(e.type) == type_id) return e.traits;
  }
  return std::nullopt;
}

std::string_view ggml_type_name(GgmlType type) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  return traits ? traits->name : std::string_view("unknown");
}

Result<uint64_t> ggml_tensor_n_bytes(GgmlType type, int64_t n_elems) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  if (!traits) {
    return unsupported("unknown ggml type id " + std::to_string(static_cast<uint32_t>(type)));
  }
  if (n_elems < 0) {
    return invalid_argument("negative element count " + std::to_string(n_elems) + " for " +
                            type_label(type));
  }
  const auto n = static_cast<uint64_t>(n_elems);
  // I2_S and TL1 (bitnet.cpp fork, ggml_nbytes): n/4 bytes of 2-bit codes, then a 32-byte
  // trailer (I2_S: f32 scale + 28 zero bytes). An empty tensor has 0 bytes, as in ggml_nbytes.
  if (type == GgmlType::kI2_S || type == GgmlType::kTL1) {
    if (n % 4 != 0) {
      return invalid_argument(type_label(type) + " element count " + std::to_string(n) +
                              " is not a multiple of 4");
    }
    return n == 0 ? 0 : n / 4 + 32;
  }
  if (type == GgmlType::kTL2) {
    return unsupported(
        "tl2 byte size depends on the tensor's shape, not only its element count "
        "(use ggml_tensor_shape_n_bytes)");
  }
  const auto block_elems = static_cast<uint64_t>(traits->block_elems);
  if (n % block_elems != 0) {
    return invalid_argument(type_label(type) + " element count " + std::to_string(n) +
                            " is not a multiple of the block size " + std::to_string(block_elems));
  }
  // Capped at int64 max so that byte counts also fit ptrdiff_t and off_t.
  uint64_t n_bytes = 0;
  if (mul_overflows(n / block_elems, static_cast<uint64_t>(traits->block_bytes), &n_bytes) ||
      n_bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return out_of_range(type_label(type) + " tensor of " + std::to_string(n) +
                        " elements is larger than 2^63 - 1 bytes");
  }
  return n_bytes;
}

Result<uint64_t> ggml_tensor_shape_n_bytes(GgmlType type, std::span<const int64_t> ne) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  if (!traits) {
    return unsupported("unknown ggml type id " + std::to_string(static_cast<uint32_t>(type)));
  }
  if (ne.empty() || ne.size() > 4) {
    return invalid_argument(std::to_string(ne.size()) + " dimensions (1 to 4 allowed)");
  }
  int64_t n_elems = 1;
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] < 0) {
      return invalid_argument("dimension " + std::to_string(i) + " is negative (" +
                              std::to_string(ne[i]) + ")");
    }
    if (__builtin_mul_overflow(n_elems, ne[i], &n_elems)) {
      return out_of_range("element count overflows int64");
    }
  }
  if (ne[0] % traits->block_elems != 0) {
    return invalid_argument("row length " + std::to_string(ne[0]) + " is not a multiple of the " +
                            type_label(type) + " block size " +
                            std::to_string(traits->block_elems));
  }
  if (type != GgmlType::kTL2) return ggml_tensor_n_bytes(type, n_elems);

  // TL2 (bitnet.cpp fork, ggml_nbytes): the first ne0-256 columns hold 3 weights in 5 bits,
  // the last 256 columns 2 weights in 4 bits; padded to 32 bytes, then a 32-byte trailer.
  // Only 2-D matrices of at least 256 columns have this layout.
  if (n_elems == 0) return 0;
  for (size_t i = 2; i < ne.size(); ++i) {
    if (ne[i] != 1) return unsupported("tl2 tensors must be 2-D");
  }
  if (ne[0] < 256) {
    return unsupported("tl2 row length " + std::to_string(ne[0]) + " is below 256");
  }
  const auto ne0 = static_cast<uint64_t>(ne[0]);
  const uint64_t ne1 = ne.size() > 1 ? static_cast<uint64_t>(ne[1]) : 1;
  uint64_t three = 0;  // (ne0 - 256) * ne1, evaluated left to right as the fork does
  if (mul_overflows(ne0 - 256, ne1, &three) || mul_overflows(three / 3, 5, &three)) {
    return out_of_range("tl2 tensor size overflows");
  }
  uint64_t n_bytes = three / 8 + ne1 * 64;  // ne1 <= n_elems / 256: no overflow
  n_bytes = (n_bytes + 31) / 32 * 32 + 32;
  return n_bytes;
}

}  // namespace bitnet
