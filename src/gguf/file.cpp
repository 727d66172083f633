// gguf::File: opening, lookups and the typed getters (lossless conversions only).
#include <cmath>
#include <limits>
#include <string>

#include "gguf/internal.h"

namespace bitnet::gguf {

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::kUint8: return "uint8";
    case ValueType::kInt8: return "int8";
    case ValueType::kUint16: return "uint16";
    case ValueType::kInt16: return "int16";
    case ValueType::kUint32: return "uint32";
    case ValueType::kInt32: return "int32";
    case ValueType::kFloat32: return "float32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kUint64: return "uint64";
    case ValueType::kInt64: return "int64";
    case ValueType::kFloat64: return "float64";
  }
  return "unknown";
}

Result<File> File::open(const std::string& path) {
  BITNET_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path));
  auto mapping = std::make_shared<MappedFile>(std::move(mapped));
  BITNET_ASSIGN_OR_RETURN(File file, parse(mapping->bytes(), path));
  file.mapping_ = std::move(mapping);
  return file;
}

Result<File> File::parse(std::span<const uint8_t> bytes, std::string name) {
  BITNET_ASSIGN_OR_RETURN(detail::Parsed parsed, detail::parse_gguf(bytes, name));
  File file;
  file.bytes_ = bytes;
  file.name_ = std::move(name);
  file.version_ = parsed.version;
  file.alignment_ = parsed.alignment;
  file.metadata_ = std::move(parsed.metadata);
  file.tensors_ = std::move(parsed.tensors);
  return file;
}

const Value* File::find(std::string_view key) const {
  for (const KeyValue& kv : metadata_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

// "array of int32" / "uint32"
std::string type_desc(const Value& v) {
  if (v.type != ValueType::kArray) return std::string(value_type_name(v.type));
  return "array of " + std::string(value_type_name(v.array_type));
}

Status wrong_type(const File& f, std::string_view key, const Value& v, std::string_view expected) {
  return corrupt_file(f.name() + ": key '" + std::string(key) + "' is " + type_desc(v) +
                      ", expected " + std::string(expected));
}

// Integer value of an integer scalar as a (wide) signed/unsigned pair; false for non-integers.
struct IntValue {
  bool negative;
  uint64_t magnitude;  // the value when !negative
  int64_t signed_value;
};
bool int_value(const Value& v, IntValue* out) {
  if (detail::is_unsigned_int(v.type)) {
    *out = {false, v.u64, 0};
    return true;
  }
  if (detail::is_signed_int(v.type)) {
    *out = {v.i64 < 0, static_cast<uint64_t>(v.i64), v.i64};
    return true;
  }
  return false;
}

}  // namespace

Result<std::optional<uint64_t>> File::get_u64(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<uint64_t>();
  IntValue iv{};
  if (!int_value(*v, &iv)) return wrong_type(*this, key, *v, "an unsigned integer");
  if (iv.negative) {
    return corrupt_file(name_ + ": key '" + std::string(key) + "' is " +
                        std::to_string(iv.signed_value) + ", expected a non-negative integer");
  }
  return std::optional<uint64_t>(iv.magnitude);
}

Result<std::optional<int64_t>> File::get_i64(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<int64_t>();
  IntValue iv{};
  if (!int_value(*v, &iv)) return wrong_type(*this, key, *v, "an integer");
  if (iv.negative) return std::optional<int64_t>(iv.signed_value);
  if (iv.magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return corrupt_file(name_ + ": key '" + std::string(key) + "' is " +
                        std::to_string(iv.magnitude) + ", which does not fit int64");
  }
  return std::optional<int64_t>(static_cast<int64_t>(iv.magnitude));
}

Result<std::optional<double>> File::get_f64(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<double>();
  if (v->type != ValueType::kFloat32 && v->type != ValueType::kFloat64) {
    return wrong_type(*this, key, *v, "float32 or float64");
  }
  return std::optional<double>(v->f64);
}

Result<std::optional<bool>> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<bool>();
  if (v->type != ValueType::kBool) return wrong_type(*this, key, *v, "bool");
  return std::optional<bool>(v->u64 != 0);
}

Result<std::optional<std::string_view>> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<std::string_view>();
  if (v->type != ValueType::kString) return wrong_type(*this, key, *v, "string");
  return std::optional<std::string_view>(v->str);
}

Result<std::optional<std::vector<std::string_view>>> File::get_string_array(
    std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<std::vector<std::string_view>>();
  if (v->type != ValueType::kArray || v->array_type != ValueType::kString) {
    return wrong_type(*this, key, *v, "array of string");
  }
  return std::optional<std::vector<std::string_view>>(v->array_strings);
}

Result<std::optional<std::vector<float>>> File::get_f32_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<std::vector<float>>();
  if (v->type != ValueType::kArray || v->array_type != ValueType::kFloat32) {
    return wrong_type(*this, key, *v, "array of float32");
  }
  std::vector<float> out(v->array_size);
  for (size_t i = 0; i < out.size(); ++i) out[i] = detail::load<float>(v->array_bytes.data() + 4 * i);
  return std::optional<std::vector<float>>(std::move(out));
}

Result<std::optional<std::vector<int32_t>>> File::get_i32_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::optional<std::vector<int32_t>>();
  const ValueType et = v->array_type;
  if (v->type != ValueType::kArray || !(detail::is_signed_int(et) || detail::is_unsigned_int(et))) {
    return wrong_type(*this, key, *v, "array of integers");
  }
  const uint64_t size = detail::scalar_size(et);
  std::vector<int32_t> out(v->array_size);
  for (size_t i = 0; i < out.size(); ++i) {
    Value e;
    detail::decode_scalar(et, v->array_bytes.data() + size * i, &e);
    IntValue iv{};
    int_value(e, &iv);
    const bool fits = iv.negative ? iv.signed_value >= std::numeric_limits<int32_t>::min()
                                  : iv.magnitude <= std::numeric_limits<int32_t>::max();
    if (!fits) {
      return corrupt_file(name_ + ": key '" + std::string(key) + "' element " + std::to_string(i) +
                          " (" + (iv.negative ? std::to_string(iv.signed_value)
                                              : std::to_string(iv.magnitude)) +
                          ") does not fit int32");
    }
    out[i] = iv.negative ? static_cast<int32_t>(iv.signed_value) : static_cast<int32_t>(iv.magnitude);
  }
  return std::optional<std::vector<int32_t>>(std::move(out));
}

}  // namespace bitnet::gguf
