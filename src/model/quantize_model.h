// `bitnet quantize`: rewrites a GGUF model with its weights in another type, with
// llama-quantize's per-tensor rules (llama.cpp src/llama-quant.cpp) for what stays in higher
// precision:
//   - only tensors named *weight with two or more dimensions are quantized; 1-D tensors
//     (norms, biases, BitNet's per-linear scales) and *_norm.weight are copied as they are;
//   - the output head (output.weight, or token_embd.weight when the head is tied) becomes
//     --head-type if given, else Q8_0 when its rows are not whole 256-blocks, else Q6_K (Q8_0
//     when the target is Q8_0; the target itself when it is a float type);
//   - an untied token_embd.weight becomes --embd-type if given, else Q4_K for TQ1_0/TQ2_0
//     targets, else the target;
//   - a tensor whose rows are not whole blocks of its type falls back as llama-quantize does
//     (TQ1_0/TQ2_0/I2_S -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; F16 if that fails too).
// Every key is copied; general.file_type and general.quantization_version are set for the
// target. The file is written tensor by tensor (gguf::Writer::write_streamed): memory holds one
// tensor at a time, and the output appears only when complete.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/status.h"
#include "gguf/types.h"

namespace bitnet {

// The types `bitnet quantize` writes (ggml's names, case-insensitive: "q4_k", "Q4_K", "tq2_0").
Result<GgmlType> parse_quant_type(std::string_view name);
// Their names, for --help and errors.
std::string quant_type_names();

// llama.cpp's llama_ftype for a file whose weights are mostly `type` (bitnet.cpp's 40 for I2_S).
uint32_t file_type_of(GgmlType type);

struct TensorPlan {
  std::string name;
  GgmlType from = GgmlType::kF32;
  GgmlType to = GgmlType::kF32;  // == from: copied as it is
  std::string why;               // the rule that chose `to` ("target", "head", "1-D", ...)
};

struct QuantizeOptions {
  std::string input_path;
  std::string output_path;
  GgmlType type = GgmlType::kQ8_0;
  std::optional<GgmlType> head_type;
  std::optional<GgmlType> embd_type;
  int n_threads = 0;  // 0 = every hardware thread
  // Called before each tensor is converted (index, count, its plan).
  std::function<void(size_t i, size_t n, const TensorPlan& plan)> progress;
};

// The type each tensor of a file gets, by the rules above: names, dimensions and row lengths.
struct TensorShape {
  std::string name;
  GgmlType type = GgmlType::kF32;
  int n_dims = 0;
  int64_t ne0 = 0;
};
std::vector<TensorPlan> plan_quantization(const std::vector<TensorShape>& tensors, GgmlType target,
                                          std::optional<GgmlType> head_type, std::optional<GgmlType> embd_type);

// Reads input_path, writes output_path. Returns the plans it carried out.
Result<std::vector<TensorPlan>> quantize_model(const QuantizeOptions& options);

}  // namespace bitnet
