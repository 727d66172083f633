// What a GGUF file holds, for `bitnet inspect`: metadata rendered as text, the tensor table,
// and the model summary when the file is a model this engine can run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bitnet/engine.h"
#include "bitnet/status.h"

namespace bitnet {

struct MetadataEntry {
  std::string key;
  std::string type;   // "u32", "string", "array[string]" ...
  std::string value;  // long arrays abbreviated
};

struct TensorEntry {
  std::string name;
  std::string type;            // "f32", "i2_s" ...
  std::vector<int64_t> shape;  // ne[0] first
  uint64_t offset = 0;         // in the data section
  uint64_t n_bytes = 0;
};

struct ModelFileInfo {
  std::string path;
  uint32_t version = 0;
  uint64_t file_bytes = 0;
  uint64_t alignment = 0;
  std::vector<MetadataEntry> metadata;
  std::vector<TensorEntry> tensors;
  std::optional<ModelSummary> summary;  // when the engine can run the file
  std::string summary_error;            // why not, otherwise
};

Result<ModelFileInfo> read_model_file_info(const std::string& path);

}  // namespace bitnet
