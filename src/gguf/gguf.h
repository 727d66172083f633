// GGUF reader (versions 1, 2, 3) over a memory-mapped file or a caller-owned byte span.
// Every count, length, offset, alignment and size is checked against the file before use;
// a malformed file is a Status naming the file and the problem.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/status.h"
#include "core/mmap_file.h"
#include "gguf/types.h"

namespace bitnet::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
std::string_view value_type_name(ValueType type);

// One metadata value. Strings and array elements point into the file's bytes (no copies),
// so a File must outlive the views it hands out.
struct Value {
  ValueType type = ValueType::kUint8;
  // Scalars (type != kString, kArray): the value widened losslessly to one of these.
  uint64_t u64 = 0;   // unsigned integers and bool
  int64_t i64 = 0;    // signed integers
  double f64 = 0.0;   // float32 / float64
  std::string_view str;                 // kString
  ValueType array_type = ValueType::kUint8;  // kArray: element type (nested arrays: kArray)
  uint64_t array_size = 0;              // kArray: element count
  std::span<const uint8_t> array_bytes; // kArray: the raw elements (numbers/bools: little-endian
                                        // values; strings, nested arrays: their GGUF encoding)
  std::vector<std::string_view> array_strings;  // kArray of strings
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  int n_dims = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
  uint64_t offset = 0;    // from the start of the data section
  uint64_t n_bytes = 0;   // ggml_tensor_n_bytes(type, n_elems())
  const uint8_t* data = nullptr;  // into the file; valid while the File lives

  int64_t n_elems() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Maps `path` and parses it.
  static Result<File> open(const std::string& path);
  // Parses bytes owned by the caller (tests, fuzzing); `name` is used in error messages.
  static Result<File> parse(std::span<const uint8_t> bytes, std::string name);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& name() const { return name_; }
  std::span<const uint8_t> bytes() const { return bytes_; }
  // Whether the bytes are a read-only mapping of the file (open) rather than caller memory.
  bool mapped() const { return mapping_ != nullptr; }

  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const Value* find(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;

  // Typed getters: nullopt when the key is absent; an error when present with a type that
  // does not convert losslessly (e.g. a negative int for get_u64, a string for get_f32).
  Result<std::optional<uint64_t>> get_u64(std::string_view key) const;
  Result<std::optional<int64_t>> get_i64(std::string_view key) const;
  Result<std::optional<double>> get_f64(std::string_view key) const;
  Result<std::optional<bool>> get_bool(std::string_view key) const;
  Result<std::optional<std::string_view>> get_string(std::string_view key) const;
  // Arrays: error if absent is not an error -> empty optional; wrong element type -> error.
  Result<std::optional<std::vector<std::string_view>>> get_string_array(std::string_view key) const;
  Result<std::optional<std::vector<float>>> get_f32_array(std::string_view key) const;
  Result<std::optional<std::vector<int32_t>>> get_i32_array(std::string_view key) const;

 private:
  std::shared_ptr<MappedFile> mapping_;  // null when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;
};

// Builds a GGUF file in memory and writes it. Keys keep insertion order; tensor data is
// aligned to `alignment` (general.alignment is written when it is not 32). Setting a key
// again replaces its value in place. Tensor data is laid out in add order, each tensor
// padded to the alignment (as gguf-py and ggml write it).
class Writer {
 public:
  explicit Writer(uint32_t version = 3, uint64_t alignment = 32);

  void set_u8(std::string key, uint8_t v);
  void set_i32(std::string key, int32_t v);
  void set_u32(std::string key, uint32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  void set_string_array(std::string key, std::vector<std::string> v);
  void set_f32_array(std::string key, std::vector<float> v);
  void set_i32_array(std::string key, std::vector<int32_t> v);

  // A value read from another file, copied as it is (scalars, strings, arrays of either; a
  // nested array is refused).
  Status set_value(std::string key, const Value& v);

  // ne[0] is the row length; `data` must hold ggml_tensor_n_bytes(type, n) bytes.
  Status add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne,
                    std::vector<uint8_t> data);
  // A tensor whose data write_streamed asks for when it reaches it.
  Status add_tensor_layout(std::string name, GgmlType type, std::vector<int64_t> ne);

  std::vector<uint8_t> serialize() const;
  Status write(const std::string& path) const;

  // Tensor i's data for write_streamed (i in add order); any other size than its type and
  // shape need is an error.
  using TensorSource = std::function<Result<std::vector<uint8_t>>(size_t i)>;
  // Writes the file without holding all of it in memory: the header, then each tensor's data
  // as `source` produces it (tensors added with data use theirs). The bytes go to path + ".part",
  // renamed to `path` only when complete; on any error the partial file is removed and `path`
  // is left as it was.
  Status write_streamed(const std::string& path, const TensorSource& source) const;

 private:
  struct Entry {
    std::string key;
    ValueType type = ValueType::kUint8;
    ValueType array_type = ValueType::kUint8;  // kArray only
    std::vector<uint8_t> raw;           // scalar or numeric array elements, little-endian
    std::vector<std::string> strings;   // kString: one; string array: all
  };
  struct Tensor {
    std::string name;
    GgmlType type = GgmlType::kF32;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
    uint64_t n_bytes = 0;  // what the type and shape need
  };
  // The header and tensor table, padded to the data alignment when tensors follow.
  std::vector<uint8_t> serialize_header() const;
  // The bytes a new tensor of this name, type and shape needs, or why it cannot be added.
  Result<uint64_t> check_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne) const;
  void set(Entry entry);
  // The alignment the data is laid out with: a valid general.alignment entry, else alignment_.
  uint64_t layout_alignment() const;

  uint32_t version_;
  uint64_t alignment_;
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
};

}  // namespace bitnet::gguf
