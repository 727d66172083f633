// GGML tensor types as stored in GGUF files, and their byte sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "bitnet/status.h"

namespace bitnet {

// Ids are the GGUF on-disk values (ggml.h; 36-39 from microsoft/BitNet's llama.cpp fork).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kI2_S = 36,  // bitnet.cpp: n/4 bytes of codes + f32 scale + 28 zero bytes (see quant/i2s.h)
  kTL1 = 38,
  kTL2 = 39,   // collides with upstream MXFP4
};

struct GgmlTypeTraits {
  std::string_view name;   // "f32", "tq2_0", "i2_s" ...
  int64_t block_elems;     // elements per block
  int64_t block_bytes;     // bytes per block
};

// Traits of a known type id, or nullopt for an id this engine does not know.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id);
std::string_view ggml_type_name(GgmlType type);

// Bytes of a tensor of `n_elems` elements of `type`, with overflow and block-divisibility checks
// (at most 2^63 - 1 bytes). I2_S is special-cased (n/4 + 32, n a multiple of 4): its owners
// declare block size 1 and type size 1, so the generic n * block_bytes / block_elems is wrong
// for it. TL1 follows the same rule in the bitnet.cpp fork's ggml_nbytes; TL2 is unsupported
// here because its size depends on the shape (see ggml_tensor_shape_n_bytes).
Result<uint64_t> ggml_tensor_n_bytes(GgmlType type, int64_t n_elems);

// Bytes of a tensor of shape `ne` (1 to 4 dims, ne[0] the row length): checks each dim is
// non-negative, the element count does not overflow, rows are whole blocks, and sizes TL2,
// whose byte count depends on ne[0] and ne[1] and not only on the element count.
Result<uint64_t> ggml_tensor_shape_n_bytes(GgmlType type, std::span<const int64_t> ne);

}  // namespace bitnet
