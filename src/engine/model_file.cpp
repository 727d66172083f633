#include "bitnet/model_file.h"

#include <fmt/format.h>

#include <cstring>

#include "gguf/gguf.h"
#include "engine/summary.h"
#include "model/model.h"

namespace bitnet {

namespace {

std::string type_name(gguf::ValueType t) { return std::string(gguf::value_type_name(t)); }

std::string render_scalar(const gguf::Value& v) {
  switch (v.type) {
    case gguf::ValueType::kInt8:
    case gguf::ValueType::kInt16:
    case gguf::ValueType::kInt32:
    case gguf::ValueType::kInt64: return std::to_string(v.i64);
    case gguf::ValueType::kFloat32:
    case gguf::ValueType::kFloat64: return fmt::format("{}", v.f64);
    case gguf::ValueType::kBool: return v.u64 ? "true" : "false";
    case gguf::ValueType::kString: return fmt::format("\"{}\"", v.str.substr(0, 200));
    default: return std::to_string(v.u64);
  }
}

std::string render(const gguf::Value& v) {
  if (v.type != gguf::ValueType::kArray) return render_scalar(v);
  constexpr size_t kShown = 8;
  std::string s = "[";
  if (v.array_type == gguf::ValueType::kString) {
    for (size_t i = 0; i < v.array_strings.size() && i < kShown; ++i) {
      s += fmt::format("{}\"{}\"", i ? ", " : "", v.array_strings[i].substr(0, 40));
    }
  } else if (v.array_type != gguf::ValueType::kArray) {
    const size_t elem = v.array_size ? v.array_bytes.size() / v.array_size : 0;
    for (size_t i = 0; i < v.array_size && i < kShown; ++i) {
      gguf::Value e;
      e.type = v.array_type;
      const uint8_t* p = v.array_bytes.data() + i * elem;
      switch (v.array_type) {
        case gguf::ValueType::kFloat32: { float f; std::memcpy(&f, p, 4); e.f64 = f; break; }
        case gguf::ValueType::kFloat64: std::memcpy(&e.f64, p, 8); break;
        case gguf::ValueType::kInt8: e.i64 = static_cast<int8_t>(*p); break;
        case gguf::ValueType::kInt16: { int16_t x; std::memcpy(&x, p, 2); e.i64 = x; break; }
        case gguf::ValueType::kInt32: { int32_t x; std::memcpy(&x, p, 4); e.i64 = x; break; }
        case gguf::ValueType::kInt64: std::memcpy(&e.i64, p, 8); break;
        default: std::memcpy(&e.u64, p, std::min<size_t>(elem, 8)); break;
      }
      s += (i ? ", " : "") + render_scalar(e);
    }
  }
  if (v.array_size > kShown) s += fmt::format(", ... ({} total)", v.array_size);
  return s + "]";
}

}  // namespace

Result<ModelFileInfo> read_model_file_info(const std::string& path) {
  BITNET_ASSIGN_OR_RETURN(gguf::File file, gguf::File::open(path));
  ModelFileInfo info;
  info.path = path;
  info.version = file.version();
  info.file_bytes = file.bytes().size();
  info.alignment = file.alignment();
  for (const gguf::KeyValue& kv : file.metadata()) {
    std::string type = type_name(kv.value.type);
    if (kv.value.type == gguf::ValueType::kArray) type = fmt::format("array[{}]", type_name(kv.value.array_type));
    info.metadata.push_back({kv.key, type, render(kv.value)});
  }
  for (const gguf::TensorInfo& t : file.tensors()) {
    TensorEntry e{t.name, std::string(ggml_type_name(t.type)), {}, t.offset, t.n_bytes};
    for (int i = 0; i < t.n_dims; ++i) e.shape.push_back(t.ne[static_cast<size_t>(i)]);
    info.tensors.push_back(std::move(e));
  }
  auto model = Network::from_gguf(file);
  if (model.ok()) {
    info.summary = summarize_model(*model);
  } else {
    info.summary_error = model.status().to_string();
  }
  return info;
}

}  // namespace bitnet
