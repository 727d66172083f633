#include "gguf/fuzz_entry.h"

#include <span>
#include <string>

#include "core/check.h"
#include "gguf/gguf.h"

namespace bitnet::gguf {
namespace {

// Reads every getter's result; a result is either a value or a non-empty error.
template <class R>
size_t consume(const R& r) {
  if (!r.ok()) {
    BITNET_CHECK(!r.status().message().empty());
    return 1;
  }
  return r.value().has_value() ? 2 : 3;
}

}  // namespace

void gguf_fuzz_one(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  auto file = File::parse(bytes, "fuzz.gguf");
  if (!file.ok()) {
    const StatusCode code = file.status().code();
    BITNET_CHECK(code == StatusCode::kCorruptFile || code == StatusCode::kUnsupported);
    BITNET_CHECK(file.status().message().rfind("fuzz.gguf: ", 0) == 0);
    return;
  }
  volatile size_t sink = 0;
  const auto inside = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    return n == 0 || (b >= data && b + n <= data + size);
  };
  for (const KeyValue& kv : file->metadata()) {
    const Value& v = kv.value;
    BITNET_CHECK(file->find(kv.key) == &v);
    BITNET_CHECK(inside(v.str.data(), v.str.size()));
    BITNET_CHECK(inside(v.array_bytes.data(), v.array_bytes.size()));
    for (std::string_view s : v.array_strings) {
      BITNET_CHECK(inside(s.data(), s.size()));
      if (!s.empty()) sink = sink + static_cast<uint8_t>(s.back());
    }
    if (!v.str.empty()) sink = sink + static_cast<uint8_t>(v.str.back());
    sink = sink + consume(file->get_u64(kv.key)) + consume(file->get_i64(kv.key)) +
           consume(file->get_f64(kv.key)) + consume(file->get_bool(kv.key)) +
           consume(file->get_string(kv.key)) + consume(file->get_string_array(kv.key)) +
           consume(file->get_f32_array(kv.key)) + consume(file->get_i32_array(kv.key));
  }
  for (const TensorInfo& t : file->tensors()) {
    BITNET_CHECK(file->find_tensor(t.name) == &t);
    BITNET_CHECK(t.n_dims >= 1 && t.n_dims <= 4 && t.n_elems() >= 0);
    BITNET_CHECK(t.offset % file->alignment() == 0);
    BITNET_CHECK(inside(t.data, t.n_bytes));
    if (t.n_bytes > 0) sink = sink + t.data[0] + t.data[t.n_bytes - 1];
  }
  (void)sink;
}

}  // namespace bitnet::gguf
