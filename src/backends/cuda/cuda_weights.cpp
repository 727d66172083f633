#include "backends/cuda/cuda_weights.h"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "backends/cuda/w2c_weights.h"
#include "quant/quant.h"

namespace bitnet::cuda {

FloatWeightView DeviceWeight::float_view() const {
  FloatWeightView v;
  switch (info.kind) {
    case WeightKind::kF16: v.format = FloatFormat::kF16; break;
    case WeightKind::kBF16: v.format = FloatFormat::kBF16; break;
    case WeightKind::kQ8_0:
      v.format = FloatFormat::kQ8_0;
      v.q8_d = scales.as<const float>();
      break;
    case WeightKind::kBlocks:
      v.format = FloatFormat::kBlocks;
      v.block = info.block;
      break;
    default: v.format = FloatFormat::kF32; break;
  }
  v.data = data.get();
  v.n_rows = info.n_rows;
  v.n_cols = info.n_cols;
  return v;
}

namespace {

// Fills w from the file tensor d; the transfers it queued may still be running when it returns.
Status fill_weight(const hal::WeightDesc& d, Uploader& up, DeviceWeight& w) {
  w.info.n_cols = d.ne[0];
  w.info.n_rows = d.ne[1] * d.ne[2] * d.ne[3];
  BITNET_ASSIGN_OR_RETURN(w.info.kind, weight_kind(d.name, d.type, w.info.n_cols, w.info.n_rows));
  const int64_t n = w.info.n_cols * w.info.n_rows;
  BITNET_ASSIGN_OR_RETURN(const uint64_t file_bytes, ggml_tensor_n_bytes(d.type, n));
  if (d.bytes.size() < file_bytes) {
    return corrupt_file(fmt::format("tensor {} has {} bytes, {} expected", d.name, d.bytes.size(), file_bytes));
  }
  switch (w.info.kind) {
    case WeightKind::kTernary: {
      auto r = repack_w2c(d.type, d.bytes, w.info.n_cols, w.info.n_rows);
      if (!r.ok()) return r.status().with_context(d.name);
      w.info.scale_block = r->scale_block;
      BITNET_ASSIGN_OR_RETURN(w.data, up.upload(r->words.data(), r->words.size() * 4, d.name));
      BITNET_ASSIGN_OR_RETURN(w.scales, up.upload(r->scales.data(), r->scales.size() * 4, d.name));
      return {};
    }
    case WeightKind::kQ8_0: {
      auto s = split_q8_0(d.bytes, w.info.n_cols, w.info.n_rows);
      if (!s.ok()) return s.status().with_context(d.name);
      BITNET_ASSIGN_OR_RETURN(w.data, up.upload(s->q.data(), s->q.size(), d.name));
      BITNET_ASSIGN_OR_RETURN(w.scales, up.upload(s->d.data(), s->d.size() * 4, d.name));
      return {};
    }
    case WeightKind::kF32:
      if (d.type != GgmlType::kF32) {  // a 1-D tensor of another type
        std::vector<float> v(static_cast<size_t>(n));
        BITNET_RETURN_IF_ERROR(quant::dequantize(d.type, d.bytes, n, v.data()).with_context(d.name));
        BITNET_ASSIGN_OR_RETURN(w.data, up.upload(v.data(), v.size() * 4, d.name));
        return {};
      }
      break;
    case WeightKind::kBlocks: {
      const std::optional<BlockFormat> b = block_format_of(d.type);
      if (!b) return internal_error(fmt::format("tensor {}: no block format", d.name));
      w.info.block = *b;
      break;
    }
    case WeightKind::kF16:
    case WeightKind::kBF16: break;
  }
  // The file's bytes as they are: F32, F16, BF16 and the block formats.
  BITNET_ASSIGN_OR_RETURN(w.data, up.upload(d.bytes.data(), file_bytes, d.name));
  return {};
}

}  // namespace

Result<DeviceWeight> upload_weight(const hal::WeightDesc& d, Uploader& up) {
  DeviceWeight w;
  if (Status s = fill_weight(d, up, w); !s.ok()) {
    (void)up.finish();  // no transfer may still write into w's buffers when they are freed
    return s;
  }
  return w;
}

}  // namespace bitnet::cuda
