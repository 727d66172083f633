#include "model/quantize_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "gguf/gguf.h"
#include "hal/ops.h"
#include "model/requantize.h"
#include "quant/quant.h"

namespace bitnet {

namespace {

constexpr GgmlType kTargets[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1,
    GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS,
    GgmlType::kI2_S, GgmlType::kTQ1_0, GgmlType::kTQ2_0,
};

bool is_float(GgmlType t) { return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16; }
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Elements a row of `t` must be a multiple of.
int64_t row_block(GgmlType t) {
  if (t == GgmlType::kI2_S) return 128;
  const auto traits = ggml_type_traits(static_cast<uint32_t>(t));
  return traits ? traits->block_elems : 1;
}

// llama-quantize's fallback for rows that are not whole blocks of `t`.
GgmlType fallback(GgmlType t, int64_t ne0) {
  GgmlType f = GgmlType::kF16;
  switch (t) {
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0:
    case GgmlType::kI2_S: f = GgmlType::kQ4_0; break;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kIQ4_XS: f = GgmlType::kIQ4_NL; break;
    case GgmlType::kQ4_K: f = GgmlType::kQ5_0; break;
    case GgmlType::kQ5_K: f = GgmlType::kQ5_1; break;
    case GgmlType::kQ6_K: f = GgmlType::kQ8_0; break;
    default: break;
  }
  return ne0 % row_block(f) == 0 ? f : GgmlType::kF16;
}

}  // namespace

Result<GgmlType> parse_quant_type(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (GgmlType t : kTargets) {
    std::string n(ggml_type_name(t));
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (n == lower) return t;
  }
  return invalid_argument(fmt::format("unknown quantization type '{}' (expected one of: {})", name, quant_type_names()));
}

std::string quant_type_names() {
  std::string s;
  for (GgmlType t : kTargets) s += (s.empty() ? "" : ", ") + std::string(ggml_type_name(t));
  return s;
}

uint32_t file_type_of(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return 0;
    case GgmlType::kF16: return 1;
    case GgmlType::kQ4_0: return 2;
    case GgmlType::kQ4_1: return 3;
    case GgmlType::kQ8_0: return 7;
    case GgmlType::kQ5_0: return 8;
    case GgmlType::kQ5_1: return 9;
    case GgmlType::kQ2_K: return 10;
    case GgmlType::kQ3_K: return 11;  // Q3_K_S
    case GgmlType::kQ4_K: return 14;  // Q4_K_S: every quantized tensor Q4_K but the head
    case GgmlType::kQ5_K: return 16;  // Q5_K_S
    case GgmlType::kQ6_K: return 18;
    case GgmlType::kIQ4_NL: return 25;
    case GgmlType::kIQ4_XS: return 30;
    case GgmlType::kBF16: return 32;
    case GgmlType::kTQ1_0: return 36;
    case GgmlType::kTQ2_0: return 37;
    case GgmlType::kI2_S: return 40;  // bitnet.cpp's LLAMA_FTYPE_MOSTLY_I2_S
    default: return 1024;             // LLAMA_FTYPE_GUESSED
  }
}

std::vector<TensorPlan> plan_quantization(const std::vector<TensorShape>& tensors, GgmlType target,
                                          std::optional<GgmlType> head_type, std::optional<GgmlType> embd_type) {
  const bool has_output = std::any_of(tensors.begin(), tensors.end(), [](const TensorShape& t) { return t.name == "output.weight"; });
  std::vector<TensorPlan> plans;
  for (const TensorShape& t : tensors) {
    TensorPlan p{t.name, t.type, t.type, ""};
    if (!ends_with(t.name, "weight") || t.n_dims < 2) {
      p.why = "1-D, kept";
    } else if (ends_with(t.name, "_norm.weight")) {
      p.why = "norm, kept";
    } else if (t.name == "output.weight" || (!has_output && t.name == "token_embd.weight")) {
      if (head_type) {
        p.to = *head_type, p.why = "head (--head-type)";
      } else if (is_float(target)) {
        p.to = target, p.why = "head";
      } else {
        p.to = t.ne0 % 256 != 0 || target == GgmlType::kQ8_0 ? GgmlType::kQ8_0 : GgmlType::kQ6_K;
        p.why = "head";
      }
    } else if (t.name == "token_embd.weight") {
      if (embd_type) {
        p.to = *embd_type, p.why = "embedding (--embd-type)";
      } else {
        p.to = target == GgmlType::kTQ1_0 || target == GgmlType::kTQ2_0 ? GgmlType::kQ4_K : target;
        p.why = "embedding";
      }
    } else {
      p.to = target, p.why = "target";
    }
    if (p.to != p.from && t.ne0 % row_block(p.to) != 0) {
      p.to = fallback(p.to, t.ne0);
      p.why += fmt::format(", rows of {} are not whole blocks: fallback", t.ne0);
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

namespace {

// Tensor t converted as planned (quantize_model checked the types before writing anything).
Result<std::vector<uint8_t>> convert(const gguf::TensorInfo& t, const TensorPlan& p, int n_threads) {
  const std::span<const uint8_t> bytes(t.data, t.n_bytes);
  if (p.to == p.from) return std::vector<uint8_t>(bytes.begin(), bytes.end());
  const int64_t n = t.n_elems();
  if (p.from == GgmlType::kI2_S || p.to == GgmlType::kI2_S) {
    // I2_S holds one scale for the whole tensor: converted whole.
    std::vector<float> values(static_cast<size_t>(n));
    BITNET_RETURN_IF_ERROR(quant::dequantize(p.from, bytes, n, values.data()).with_context(t.name));
    auto q = quant::quantize(p.to, values.data(), n / t.ne[0], t.ne[0]);
    if (!q.ok()) return q.status().with_context(t.name);
    return q;
  }
  const hal::WeightDesc desc{t.name, t.type, t.ne, bytes, false};
  return requantize_rows(desc, p.to, n_threads);
}

}  // namespace

Result<std::vector<TensorPlan>> quantize_model(const QuantizeOptions& o) {
  if (o.input_path == o.output_path) {
    return invalid_argument(fmt::format("the output {} is the input: write to another file", o.output_path));
  }
  BITNET_ASSIGN_OR_RETURN(const gguf::File in, gguf::File::open(o.input_path));
  std::vector<TensorShape> shapes;
  for (const gguf::TensorInfo& t : in.tensors()) shapes.push_back({t.name, t.type, t.n_dims, t.ne[0]});
  const std::vector<TensorPlan> plans = plan_quantization(shapes, o.type, o.head_type, o.embd_type);
  for (const TensorPlan& p : plans) {
    if (p.to != p.from && !quant::can_dequantize(p.from)) {
      return unsupported(fmt::format("{}: cannot read its {} weights", p.name, ggml_type_name(p.from)));
    }
    if (p.to != p.from && !quant::can_quantize(p.to)) {
      return unsupported(fmt::format("{}: cannot write {} weights", p.name, ggml_type_name(p.to)));
    }
  }

  gguf::Writer w(3);
  for (const gguf::KeyValue& kv : in.metadata()) {
    if (kv.key == "general.alignment" || kv.key == "general.file_type" || kv.key == "general.quantization_version") continue;
    BITNET_RETURN_IF_ERROR(w.set_value(kv.key, kv.value).with_context(o.input_path));
  }
  w.set_u32("general.file_type", file_type_of(o.type));
  w.set_u32("general.quantization_version", 2);  // GGML_QNT_VERSION
  for (size_t i = 0; i < plans.size(); ++i) {
    const gguf::TensorInfo& t = in.tensors()[i];
    BITNET_RETURN_IF_ERROR(w.add_tensor_layout(t.name, plans[i].to, {t.ne.begin(), t.ne.begin() + t.n_dims}));
  }
  const Status s = w.write_streamed(o.output_path, [&](size_t i) {
    if (o.progress) o.progress(i, plans.size(), plans[i]);
    return convert(in.tensors()[i], plans[i], o.n_threads);
  });
  BITNET_RETURN_IF_ERROR(s);
  return plans;
}

}  // namespace bitnet
