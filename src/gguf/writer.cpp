// gguf::Writer: serializes metadata and tensors in the layout reader.cpp describes.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "core/check.h"
#include "gguf/internal.h"

namespace bitnet::gguf {
namespace {

template <class T>
void append(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

template <class T>
std::vector<uint8_t> raw_of(const T* v, size_t n) {
  std::vector<uint8_t> raw(n * sizeof(T));
  if (n > 0) std::memcpy(raw.data(), v, raw.size());
  return raw;
}

uint64_t align_up(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

// Serializes counts and lengths in the width of `version` (uint32 in v1).
class Out {
 public:
  explicit Out(uint32_t version) : version_(version) {}

  void count(uint64_t n) {
    if (version_ == 1) {
      BITNET_CHECK(n <= std::numeric_limits<uint32_t>::max());  // add_tensor/set_* keep v1 small
      append(&bytes_, static_cast<uint32_t>(n));
    } else {
      append(&bytes_, n);
    }
  }
  void string(std::string_view s) {
    count(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void raw(std::span<const uint8_t> b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  void pad_to(uint64_t align) { bytes_.resize(align_up(bytes_.size(), align), 0); }
  template <class T>
  void put(T v) {
    append(&bytes_, v);
  }

  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  uint32_t version_;
  std::vector<uint8_t> bytes_;
};

}  // namespace

Writer::Writer(uint32_t version, uint64_t alignment) : version_(version), alignment_(alignment) {
  if (alignment != detail::kDefaultAlignment) {
    // A uint32 key, as ggml reads it; an invalid value is written as given (for tests of
    // hostile files) while the data stays aligned to 32.
    set_u32("general.alignment", static_cast<uint32_t>(alignment));
  }
}

void Writer::set(Entry entry) {
  for (Entry& e : entries_) {
    if (e.key == entry.key) {
      e = std::move(entry);
      return;
    }
  }
  entries_.push_back(std::move(entry));
}

void Writer::set_u8(std::string key, uint8_t v) {
  set({std::move(key), ValueType::kUint8, ValueType::kUint8, raw_of(&v, 1), {}});
}
void Writer::set_i32(std::string key, int32_t v) {
  set({std::move(key), ValueType::kInt32, ValueType::kUint8, raw_of(&v, 1), {}});
}
void Writer::set_u32(std::string key, uint32_t v) {
  set({std::move(key), ValueType::kUint32, ValueType::kUint8, raw_of(&v, 1), {}});
}
void Writer::set_u64(std::string key, uint64_t v) {
  set({std::move(key), ValueType::kUint64, ValueType::kUint8, raw_of(&v, 1), {}});
}
void Writer::set_f32(std::string key, float v) {
  set({std::move(key), ValueType::kFloat32, ValueType::kUint8, raw_of(&v, 1), {}});
}
void Writer::set_bool(std::string key, bool v) {
  const uint8_t b = v ? 1 : 0;
  set({std::move(key), ValueType::kBool, ValueType::kUint8, raw_of(&b, 1), {}});
}
void Writer::set_string(std::string key, std::string v) {
  set({std::move(key), ValueType::kString, ValueType::kUint8, {}, {std::move(v)}});
}
void Writer::set_string_array(std::string key, std::vector<std::string> v) {
  set({std::move(key), ValueType::kArray, ValueType::kString, {}, std::move(v)});
}
void Writer::set_f32_array(std::string key, std::vector<float> v) {
  set({std::move(key), ValueType::kArray, ValueType::kFloat32, raw_of(v.data(), v.size()), {}});
}
void Writer::set_i32_array(std::string key, std::vector<int32_t> v) {
  set({std::move(key), ValueType::kArray, ValueType::kInt32, raw_of(v.data(), v.size()), {}});
}

Status Writer::set_value(std::string key, const Value& v) {
  Entry e{std::move(key), v.type, ValueType::kUint8, {}, {}};
  const auto scalar = [](ValueType type, const Value& x) {
    std::vector<uint8_t> raw;
    switch (type) {
      case ValueType::kUint8: append(&raw, static_cast<uint8_t>(x.u64)); break;
      case ValueType::kBool: append(&raw, static_cast<uint8_t>(x.u64 != 0)); break;
      case ValueType::kInt8: append(&raw, static_cast<int8_t>(x.i64)); break;
      case ValueType::kUint16: append(&raw, static_cast<uint16_t>(x.u64)); break;
      case ValueType::kInt16: append(&raw, static_cast<int16_t>(x.i64)); break;
      case ValueType::kUint32: append(&raw, static_cast<uint32_t>(x.u64)); break;
      case ValueType::kInt32: append(&raw, static_cast<int32_t>(x.i64)); break;
      case ValueType::kFloat32: append(&raw, static_cast<float>(x.f64)); break;
      case ValueType::kUint64: append(&raw, x.u64); break;
      case ValueType::kInt64: append(&raw, x.i64); break;
      case ValueType::kFloat64: append(&raw, x.f64); break;
      default: break;
    }
    return raw;
  };
  if (v.type == ValueType::kString) {
    e.strings.emplace_back(v.str);
  } else if (v.type == ValueType::kArray) {
    e.array_type = v.array_type;
    if (v.array_type == ValueType::kString) {
      e.strings.assign(v.array_strings.begin(), v.array_strings.end());
    } else if (v.array_type == ValueType::kArray) {
      return unsupported("gguf writer: key '" + e.key + "' is a nested array");
    } else {
      e.raw.assign(v.array_bytes.begin(), v.array_bytes.end());
    }
  } else {
    e.raw = scalar(v.type, v);
  }
  set(std::move(e));
  return Status::ok_status();
}

Result<uint64_t> Writer::check_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne) const {
  for (const Tensor& t : tensors_) {
    if (t.name == name) return invalid_argument("gguf writer: duplicate tensor '" + name + "'");
  }
  auto n_bytes = ggml_tensor_shape_n_bytes(type, ne);
  if (!n_bytes.ok()) return n_bytes.status().with_context("gguf writer: tensor '" + name + "'");
  if (version_ == 1) {
    for (int64_t d : ne) {
      if (d > std::numeric_limits<uint32_t>::max()) {
        return invalid_argument("gguf writer: tensor '" + name + "': dimension " +
                                std::to_string(d) + " does not fit GGUF v1's uint32");
      }
    }
  }
  return *n_bytes;
}

Status Writer::add_tensor_layout(std::string name, GgmlType type, std::vector<int64_t> ne) {
  BITNET_ASSIGN_OR_RETURN(const uint64_t n_bytes, check_tensor(name, type, ne));
  tensors_.push_back({std::move(name), type, std::move(ne), {}, n_bytes});
  return Status::ok_status();
}

Status Writer::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne,
                          std::vector<uint8_t> data) {
  BITNET_ASSIGN_OR_RETURN(const uint64_t n_bytes, check_tensor(name, type, ne));
  if (data.size() != n_bytes) {
    return invalid_argument("gguf writer: tensor '" + name + "' has " + std::to_string(data.size()) +
                            " bytes of data, its type and shape need " + std::to_string(n_bytes));
  }
  tensors_.push_back({std::move(name), type, std::move(ne), std::move(data), n_bytes});
  return Status::ok_status();
}

uint64_t Writer::layout_alignment() const {
  for (const Entry& e : entries_) {
    if (e.key != "general.alignment" || e.type != ValueType::kUint32) continue;
    const auto v = detail::load<uint32_t>(e.raw.data());
    if (std::has_single_bit(v)) return v;
  }
  return std::has_single_bit(alignment_) ? alignment_ : detail::kDefaultAlignment;
}

std::vector<uint8_t> Writer::serialize() const {
  std::vector<uint8_t> bytes = serialize_header();
  const uint64_t align = layout_alignment();
  for (const Tensor& t : tensors_) {
    BITNET_CHECK(t.data.size() == t.n_bytes);  // layout-only tensors are for write_streamed
    bytes.insert(bytes.end(), t.data.begin(), t.data.end());
    bytes.resize(align_up(bytes.size(), align), 0);
  }
  return bytes;
}

std::vector<uint8_t> Writer::serialize_header() const {
  const uint64_t align = layout_alignment();
  Out out(version_);
  out.put(detail::kMagic);
  out.put(version_);
  out.count(tensors_.size());
  out.count(entries_.size());

  for (const Entry& e : entries_) {
    out.string(e.key);
    out.put(static_cast<uint32_t>(e.type));
    if (e.type == ValueType::kString) {
      out.string(e.strings[0]);
    } else if (e.type == ValueType::kArray) {
      out.put(static_cast<uint32_t>(e.array_type));
      if (e.array_type == ValueType::kString) {
        out.count(e.strings.size());
        for (const std::string& s : e.strings) out.string(s);
      } else {
        out.count(e.raw.size() / detail::scalar_size(e.array_type));
        out.raw(e.raw);
      }
    } else {
      out.raw(e.raw);
    }
  }

  uint64_t offset = 0;  // from the start of the data section
  for (const Tensor& t : tensors_) {
    out.string(t.name);
    out.put(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) {
      if (version_ == 1) {
        out.put(static_cast<uint32_t>(d));
      } else {
        out.put(static_cast<uint64_t>(d));
      }
    }
    out.put(static_cast<uint32_t>(t.type));
    out.put(offset);
    offset = align_up(offset + t.n_bytes, align);
  }

  // gguf-py pads the header only when tensor data follows.
  if (!tensors_.empty()) out.pad_to(align);
  return std::move(out.bytes());
}

Status Writer::write(const std::string& path) const {
  const std::vector<uint8_t> bytes = serialize();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return io_error(path + ": cannot create: " + std::strerror(errno));
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int write_err = errno;
  if (std::fclose(f) != 0 || written != bytes.size()) {
    return io_error(path + ": cannot write: " + std::strerror(written != bytes.size() ? write_err : errno));
  }
  return Status::ok_status();
}

}  // namespace bitnet::gguf

namespace bitnet::gguf {

Status Writer::write_streamed(const std::string& path, const TensorSource& source) const {
  const std::string part = path + ".part";
  std::FILE* f = std::fopen(part.c_str(), "wb");
  if (!f) return io_error(part + ": cannot create: " + std::strerror(errno));
  const auto fail = [&](Status s) {
    std::fclose(f);
    std::remove(part.c_str());
    return s;
  };
  const auto put = [&](std::span<const uint8_t> b) -> Status {
    if (!b.empty() && std::fwrite(b.data(), 1, b.size(), f) != b.size()) {
      return io_error(part + ": cannot write: " + std::strerror(errno));
    }
    return Status::ok_status();
  };
  const uint64_t align = layout_alignment();
  if (Status s = put(serialize_header()); !s.ok()) return fail(s);
  const std::vector<uint8_t> zeros(align, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    Result<std::vector<uint8_t>> data = t.data.size() == t.n_bytes ? Result<std::vector<uint8_t>>(t.data) : source(i);
    if (!data.ok()) return fail(data.status());
    if (data->size() != t.n_bytes) {
      return fail(internal_error("gguf writer: tensor '" + t.name + "' got " + std::to_string(data->size()) +
                                 " bytes of data, its type and shape need " + std::to_string(t.n_bytes)));
    }
    if (Status s = put(*data); !s.ok()) return fail(s);
    if (Status s = put(std::span(zeros).first(align_up(t.n_bytes, align) - t.n_bytes)); !s.ok()) return fail(s);
  }
  if (std::fclose(f) != 0) {
    std::remove(part.c_str());
    return io_error(part + ": cannot write: " + std::strerror(errno));
  }
  if (std::rename(part.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(part.c_str());
    return io_error(path + ": cannot rename " + part + " to it: " + std::strerror(err));
  }
  return Status::ok_status();
}

}  // namespace bitnet::gguf
