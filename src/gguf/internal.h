// Pieces shared by the GGUF reader, the typed getters and the writer (not a public API).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "bitnet/status.h"
#include "gguf/gguf.h"

namespace bitnet::gguf::detail {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader and writer assume a little-endian host");

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxValueType = 12;   // ValueType::kFloat64

// Little-endian load of a T from unaligned bytes.
template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Bytes of one scalar of `type` on disk; 0 for kString and kArray, which have no fixed size.
inline uint64_t scalar_size(ValueType type) {
  switch (type) {
    case ValueType::kUint8: case ValueType::kInt8: case ValueType::kBool: return 1;
    case ValueType::kUint16: case ValueType::kInt16: return 2;
    case ValueType::kUint32: case ValueType::kInt32: case ValueType::kFloat32: return 4;
    case ValueType::kUint64: case ValueType::kInt64: case ValueType::kFloat64: return 8;
    case ValueType::kString: case ValueType::kArray: return 0;
  }
  return 0;
}

// Decodes the scalar at `p` (scalar_size(type) bytes) into the widened fields of `out`:
// unsigned ints and bool -> u64, signed ints -> i64, floats -> f64.
inline void decode_scalar(ValueType type, const uint8_t* p, Value* out) {
  out->type = type;
  switch (type) {
    case ValueType::kUint8: out->u64 = load<uint8_t>(p); break;
    case ValueType::kUint16: out->u64 = load<uint16_t>(p); break;
    case ValueType::kUint32: out->u64 = load<uint32_t>(p); break;
    case ValueType::kUint64: out->u64 = load<uint64_t>(p); break;
    case ValueType::kBool: out->u64 = load<uint8_t>(p) != 0 ? 1 : 0; break;
    case ValueType::kInt8: out->i64 = load<int8_t>(p); break;
    case ValueType::kInt16: out->i64 = load<int16_t>(p); break;
    case ValueType::kInt32: out->i64 = load<int32_t>(p); break;
    case ValueType::kInt64: out->i64 = load<int64_t>(p); break;
    case ValueType::kFloat32: out->f64 = load<float>(p); break;
    case ValueType::kFloat64: out->f64 = load<double>(p); break;
    case ValueType::kString: case ValueType::kArray: break;
  }
}

inline bool is_unsigned_int(ValueType t) {
  return t == ValueType::kUint8 || t == ValueType::kUint16 || t == ValueType::kUint32 ||
         t == ValueType::kUint64;
}
inline bool is_signed_int(ValueType t) {
  return t == ValueType::kInt8 || t == ValueType::kInt16 || t == ValueType::kInt32 ||
         t == ValueType::kInt64;
}

// What File::parse needs to build a File.
struct Parsed {
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  std::vector<KeyValue> metadata;
  std::vector<TensorInfo> tensors;
};

// Parses a whole GGUF image; `name` prefixes every error message.
Result<Parsed> parse_gguf(std::span<const uint8_t> bytes, const std::string& name);

}  // namespace bitnet::gguf::detail
