// GGUF parser, versions 1 to 3. Layout (all little-endian):
//
//   "GGUF" | u32 version | count n_tensors | count n_kv
//   n_kv      x { string key | u32 value_type | value }
//   n_tensors x { string name | u32 n_dims | n_dims x dim | u32 ggml_type | u64 offset }
//   zero padding to `alignment` | data section (tensor offsets are relative to its start)
//
//   count, string length, array length: u32 in v1, u64 in v2 and v3; dim: u32 in v1, u64 after
//   string = length | bytes (no NUL);  array = u32 element type | length | elements
//
// Every count and length is checked against the bytes left before anything is reserved or read,
// so a hostile header can neither allocate nor read beyond the file.
#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>

#include "gguf/internal.h"

namespace bitnet::gguf::detail {
namespace {

constexpr int kMaxArrayDepth = 8;           // arrays of arrays; ggml itself allows none
constexpr uint64_t kMaxKeyBytes = 65535;    // GGUF spec: keys are at most 65535 bytes
constexpr uint64_t kMaxNameBytes = 65535;
// Downstream code (tokenizers) indexes strings with int32 (CVE-2025-49847).
constexpr uint64_t kMaxStringBytes = std::numeric_limits<int32_t>::max();
// Far above any model (a few thousand tensors, a hundred keys), far below an allocation bomb.
constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
constexpr uint64_t kMaxKeys = uint64_t{1} << 20;

std::string num(uint64_t v) { return std::to_string(v); }

// Where an error happened: "key 'x'", "tensor #3", plus the array element when there is one.
struct Where {
  std::string_view what;
  uint64_t element = std::numeric_limits<uint64_t>::max();
};

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  Result<Parsed> run();

 private:
  uint64_t remaining() const { return bytes_.size() - pos_; }
  // Smallest possible entries: a key-value pair is an empty key, a type and a 1-byte value; a
  // tensor info is an empty name, n_dims, one dim, a type and an offset.
  uint64_t min_kv_bytes() const { return len_bytes_ + 4 + 1; }
  uint64_t min_tensor_bytes() const { return len_bytes_ + 4 + len_bytes_ + 4 + 8; }

  Status corrupt(const Where& where, const std::string& problem) const {
    std::string m = name_ + ": ";
    if (!where.what.empty()) {
      m.append(where.what);
      if (where.element != std::numeric_limits<uint64_t>::max()) m += " element " + num(where.element);
      m += ": ";
    }
    return corrupt_file(m + problem);
  }
  Status past_end(const Where& where, const std::string& what_bytes, size_t at) const {
    return corrupt(where, what_bytes + " at offset " + num(at) + " runs past the end of the file (" +
                              num(bytes_.size()) + " bytes)");
  }

  Result<uint32_t> read_u32(const Where& where, std::string_view field);
  Result<uint64_t> read_u64(const Where& where, std::string_view field);
  Result<uint64_t> read_count(const Where& where, std::string_view field) {
    if (version_ == 1) {
      BITNET_ASSIGN_OR_RETURN(uint32_t v, read_u32(where, field));
      return uint64_t{v};
    }
    return read_u64(where, field);
  }
  Result<std::string_view> read_string(const Where& where, uint64_t max_bytes);
  Result<ValueType> read_value_type(const Where& where, std::string_view field);
  Status read_value(const Where& where, ValueType type, int depth, Value* out);
  Status read_array(const Where& where, int depth, Value* out);

  Status read_header(uint64_t* n_tensors, uint64_t* n_kv);
  Status read_metadata(uint64_t n_kv, Parsed* out);
  Status read_alignment(Parsed* out) const;
  Status read_tensor_info(uint64_t index, Parsed* out);
  Status place_tensors(Parsed* out) const;

  std::span<const uint8_t> bytes_;
  const std::string& name_;
  size_t pos_ = 0;
  uint32_t version_ = 0;
  uint64_t len_bytes_ = 8;  // bytes of a count or length field (4 in v1)
  std::unordered_set<std::string_view> seen_;  // keys, then tensor names (views into bytes_)
};

Result<uint32_t> Parser::read_u32(const Where& where, std::string_view field) {
  if (remaining() < 4) return past_end(where, std::string(field) + " (4 bytes)", pos_);
  const auto v = load<uint32_t>(bytes_.data() + pos_);
  pos_ += 4;
  return v;
}

Result<uint64_t> Parser::read_u64(const Where& where, std::string_view field) {
  if (remaining() < 8) return past_end(where, std::string(field) + " (8 bytes)", pos_);
  const auto v = load<uint64_t>(bytes_.data() + pos_);
  pos_ += 8;
  return v;
}

Result<std::string_view> Parser::read_string(const Where& where, uint64_t max_bytes) {
  const size_t at = pos_;
  BITNET_ASSIGN_OR_RETURN(uint64_t n, read_count(where, "string length"));
  if (n > max_bytes) {
    return corrupt(where, "string of " + num(n) + " bytes at offset " + num(at) +
                              " is longer than the limit of " + num(max_bytes));
  }
  if (n > remaining()) return past_end(where, "string of " + num(n) + " bytes", at);
  const std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
  pos_ += n;
  return s;
}

Result<ValueType> Parser::read_value_type(const Where& where, std::string_view field) {
  const size_t at = pos_;
  BITNET_ASSIGN_OR_RETURN(uint32_t t, read_u32(where, field));
  if (t > kMaxValueType) {
    return corrupt(where, std::string(field) + " " + num(t) + " at offset " + num(at) +
                              " is not a GGUF value type");
  }
  return static_cast<ValueType>(t);
}

Status Parser::read_value(const Where& where, ValueType type, int depth, Value* out) {
  out->type = type;
  if (type == ValueType::kArray) return read_array(where, depth, out);
  if (type == ValueType::kString) {
    BITNET_ASSIGN_OR_RETURN(out->str, read_string(where, kMaxStringBytes));
    return Status::ok_status();
  }
  const uint64_t size = scalar_size(type);
  if (remaining() < size) {
    return past_end(where, std::string(value_type_name(type)) + " value", pos_);
  }
  decode_scalar(type, bytes_.data() + pos_, out);
  pos_ += size;
  return Status::ok_status();
}

Status Parser::read_array(const Where& where, int depth, Value* out) {
  const size_t at = pos_;
  if (depth >= kMaxArrayDepth) {
    return corrupt(where, "arrays nested more than " + num(kMaxArrayDepth) + " deep at offset " +
                              num(at));
  }
  BITNET_ASSIGN_OR_RETURN(out->array_type, read_value_type(where, "array element type"));
  BITNET_ASSIGN_OR_RETURN(out->array_size, read_count(where, "array length"));
  const uint64_t n = out->array_size;
  const size_t elems_at = pos_;
  const std::string n_of = "array of " + num(n) + " " + std::string(value_type_name(out->array_type));

  if (out->array_type == ValueType::kString) {
    // Each string takes at least its length field: bounds the reservation below.
    if (n > remaining() / len_bytes_) return past_end(where, n_of, at);
    out->array_strings.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      BITNET_ASSIGN_OR_RETURN(std::string_view s,
                              read_string(Where{where.what, i}, kMaxStringBytes));
      out->array_strings.push_back(s);
    }
  } else if (out->array_type == ValueType::kArray) {
    // Nested arrays are walked (bounded depth) and kept as raw bytes.
    if (n > remaining() / (4 + len_bytes_)) return past_end(where, n_of, at);
    for (uint64_t i = 0; i < n; ++i) {
      Value inner;
      inner.type = ValueType::kArray;
      BITNET_RETURN_IF_ERROR(read_array(Where{where.what, i}, depth + 1, &inner));
    }
  } else {
    const uint64_t size = scalar_size(out->array_type);
    if (n > remaining() / size) return past_end(where, n_of + " (" + num(size) + " bytes each)", at);
    pos_ += n * size;
  }
  out->array_bytes = bytes_.subspan(elems_at, pos_ - elems_at);
  return Status::ok_status();
}

Status Parser::read_header(uint64_t* n_tensors, uint64_t* n_kv) {
  const Where file{};
  if (bytes_.size() < 8) {
    return corrupt(file, "too short to be a GGUF file (" + num(bytes_.size()) + " bytes)");
  }
  const auto magic = load<uint32_t>(bytes_.data());
  if (magic != kMagic) {
    return corrupt(file, "not a GGUF file (magic bytes are not \"GGUF\")");
  }
  version_ = load<uint32_t>(bytes_.data() + 4);
  pos_ = 8;
  // A big-endian file stores version 3 as 00 00 00 03: low half zero, high half small.
  if ((version_ & 0xFFFFu) == 0 && (version_ >> 16) != 0) {
    return unsupported(name_ + ": big-endian GGUF files are not supported (version field " +
                       num(version_) + ")");
  }
  if (version_ < 1 || version_ > 3) {
    return unsupported(name_ + ": unsupported GGUF version " + num(version_) +
                       " (versions 1, 2 and 3 are read)");
  }
  len_bytes_ = version_ == 1 ? 4 : 8;
  BITNET_ASSIGN_OR_RETURN(*n_tensors, read_count(file, "tensor count"));
  const size_t n_kv_at = pos_;
  BITNET_ASSIGN_OR_RETURN(*n_kv, read_count(file, "key-value count"));

  const uint64_t min_kv = min_kv_bytes();
  if (*n_kv > kMaxKeys || *n_kv > remaining() / min_kv) {
    return corrupt(file, "key-value count " + num(*n_kv) + " at offset " + num(n_kv_at) +
                             " cannot fit in the remaining " + num(remaining()) + " bytes");
  }
  if (*n_tensors > kMaxTensors ||
      *n_tensors > (remaining() - *n_kv * min_kv) / min_tensor_bytes()) {
    return corrupt(file, "tensor count " + num(*n_tensors) + " at offset 8 cannot fit in the remaining " +
                             num(remaining()) + " bytes");
  }
  return Status::ok_status();
}

Status Parser::read_metadata(uint64_t n_kv, Parsed* out) {
  out->metadata.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t at = pos_;
    const std::string index = "key #" + num(i);
    BITNET_ASSIGN_OR_RETURN(std::string_view key, read_string(Where{index}, kMaxKeyBytes));
    const std::string where = "key '" + std::string(key) + "'";
    if (!seen_.insert(key).second) {
      return corrupt(Where{}, "duplicate " + where + " at offset " + num(at));
    }
    KeyValue kv;
    kv.key = std::string(key);
    BITNET_ASSIGN_OR_RETURN(ValueType type, read_value_type(Where{where}, "value type"));
    BITNET_RETURN_IF_ERROR(read_value(Where{where}, type, 0, &kv.value));
    out->metadata.push_back(std::move(kv));
  }
  seen_.clear();
  return Status::ok_status();
}

// general.alignment: uint32, a nonzero power of two (ggml reads it with gguf_get_val_u32).
Status Parser::read_alignment(Parsed* out) const {
  for (const KeyValue& kv : out->metadata) {
    if (kv.key != "general.alignment") continue;
    const Where where{"key 'general.alignment'"};
    if (kv.value.type != ValueType::kUint32) {
      return corrupt(where, "is " + std::string(value_type_name(kv.value.type)) +
                                ", expected uint32");
    }
    if (!std::has_single_bit(kv.value.u64)) {
      return corrupt(where, "alignment " + num(kv.value.u64) + " is not a nonzero power of two");
    }
    out->alignment = kv.value.u64;
  }
  return Status::ok_status();
}

Status Parser::read_tensor_info(uint64_t index, Parsed* out) {
  const size_t at = pos_;
  const std::string index_where = "tensor #" + num(index);
  BITNET_ASSIGN_OR_RETURN(std::string_view name, read_string(Where{index_where}, kMaxNameBytes));
  const std::string where_s = "tensor '" + std::string(name) + "'";
  const Where where{where_s};
  if (!seen_.insert(name).second) {
    return corrupt(Where{}, "duplicate " + where_s + " at offset " + num(at));
  }
  TensorInfo t;
  t.name = std::string(name);

  const size_t n_dims_at = pos_;
  BITNET_ASSIGN_OR_RETURN(uint32_t n_dims, read_u32(where, "n_dims"));
  if (n_dims < 1 || n_dims > 4) {
    return corrupt(where, "n_dims " + num(n_dims) + " at offset " + num(n_dims_at) +
                              " is not in 1..4");
  }
  t.n_dims = static_cast<int>(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    const size_t dim_at = pos_;
    uint64_t dim = 0;
    if (version_ == 1) {
      BITNET_ASSIGN_OR_RETURN(uint32_t d32, read_u32(where, "dimension"));
      dim = d32;
    } else {
      BITNET_ASSIGN_OR_RETURN(dim, read_u64(where, "dimension"));
    }
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return corrupt(where, "dimension " + num(d) + " at offset " + num(dim_at) + " is " +
                                num(dim) + ", negative as int64");
    }
    t.ne[d] = static_cast<int64_t>(dim);
  }

  const size_t type_at = pos_;
  BITNET_ASSIGN_OR_RETURN(uint32_t type_id, read_u32(where, "type"));
  if (!ggml_type_traits(type_id)) {
    return unsupported(name_ + ": " + where_s + ": unknown ggml type id " + num(type_id) +
                       " at offset " + num(type_at));
  }
  t.type = static_cast<GgmlType>(type_id);
  BITNET_ASSIGN_OR_RETURN(t.offset, read_u64(where, "data offset"));

  auto n_bytes = ggml_tensor_shape_n_bytes(t.type, std::span<const int64_t>(t.ne.data(), n_dims));
  if (!n_bytes.ok()) {
    std::string shape;
    for (uint32_t d = 0; d < n_dims; ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
    const std::string m = name_ + ": " + where_s + " (" + std::string(ggml_type_name(t.type)) +
                          " [" + shape + "]): " + n_bytes.status().message();
    return n_bytes.status().code() == StatusCode::kUnsupported ? unsupported(m) : corrupt_file(m);
  }
  t.n_bytes = *n_bytes;
  out->tensors.push_back(std::move(t));
  return Status::ok_status();
}

// The data section starts at the header's end rounded up to the alignment. Every tensor must
// be aligned, lie inside the file and overlap no other tensor. With no tensors the aligned
// start may lie past the end of the file (gguf-py writes no padding then).
Status Parser::place_tensors(Parsed* out) const {
  const uint64_t align = out->alignment;
  const uint64_t data_start = (pos_ + align - 1) / align * align;  // pos_ <= size, align <= 2^31
  const uint64_t size = bytes_.size();
  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  ranges.reserve(out->tensors.size());
  for (size_t i = 0; i < out->tensors.size(); ++i) {
    TensorInfo& t = out->tensors[i];
    const std::string where_s = "tensor '" + t.name + "'";
    const Where where{where_s};
    if (t.offset % align != 0) {
      return corrupt(where, "data offset " + num(t.offset) + " is not a multiple of the alignment " +
                                num(align));
    }
    uint64_t begin = 0, end = 0;
    if (__builtin_add_overflow(data_start, t.offset, &begin) ||
        __builtin_add_overflow(begin, t.n_bytes, &end)) {
      return corrupt(where, "data offset " + num(t.offset) + " + " + num(t.n_bytes) +
                                " bytes overflows a 64-bit file position");
    }
    if (end > size) {
      return corrupt(where, "data [" + num(begin) + ", " + num(end) +
                                ") runs past the end of the file (" + num(size) + " bytes)");
    }
    t.data = bytes_.data() + begin;
    if (t.n_bytes > 0) ranges.push_back({begin, end, i});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    const Range& a = ranges[i - 1];
    const Range& b = ranges[i];
    if (a.end > b.begin) {
      return corrupt(Where{}, "tensor '" + out->tensors[a.index].name + "' data [" + num(a.begin) +
                                  ", " + num(a.end) + ") overlaps tensor '" +
                                  out->tensors[b.index].name + "' data [" + num(b.begin) + ", " +
                                  num(b.end) + ")");
    }
  }
  return Status::ok_status();
}

Result<Parsed> Parser::run() {
  Parsed out;
  uint64_t n_tensors = 0, n_kv = 0;
  BITNET_RETURN_IF_ERROR(read_header(&n_tensors, &n_kv));
  out.version = version_;
  BITNET_RETURN_IF_ERROR(read_metadata(n_kv, &out));
  BITNET_RETURN_IF_ERROR(read_alignment(&out));
  // Re-check the tensor count against what the metadata left.
  if (n_tensors > remaining() / min_tensor_bytes()) {
    return corrupt(Where{}, "tensor count " + num(n_tensors) + " cannot fit in the " +
                                num(remaining()) + " bytes after the metadata");
  }
  out.tensors.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) BITNET_RETURN_IF_ERROR(read_tensor_info(i, &out));
  BITNET_RETURN_IF_ERROR(place_tensors(&out));
  return out;
}

}  // namespace

Result<Parsed> parse_gguf(std::span<const uint8_t> bytes, const std::string& name) {
  return Parser(bytes, name).run();
}

}  // namespace bitnet::gguf::detail
