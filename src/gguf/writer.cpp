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

Status Writer::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne,
                          std::vector<uint8_t> data) {
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
  if (data.size() != *n_bytes) {
    return invalid_argument("gguf writer: tensor '" + name + "' has " + std::to_string(data.size()) +
                            " bytes of data, its type and shape need " + std::to_string(*n_bytes));
  }
  tensors_.push_back({std::move(name), type, std::move(ne), std::move(data)});
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
    offset = align_up(offset + t.data.size(), align);
  }

  // gguf-py pads the header only when tensor data follows.
  if (!tensors_.empty()) out.pad_to(align);
  for (const Tensor& t : tensors_) {
    out.raw(t.data);
    out.pad_to(align);
  }
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
