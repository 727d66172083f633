#include "backends/cpu/weights.h"

#include <fmt/format.h>

#include "quant/quant.h"

namespace bitnet::cpu {

void pack_ternary_rows(const uint8_t* codes, int64_t n_rows, int64_t n_cols, uint8_t* packed) {
  const int64_t n_groups = n_rows * n_cols / 128;  // groups never straddle rows
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* c = codes + g * 128;
    uint8_t* out = packed + g * 32;
    for (int j = 0; j < 32; ++j) {
      out[j] = static_cast<uint8_t>((c[j] << 6) | (c[j + 32] << 4) | (c[j + 64] << 2) | c[j + 96]);
    }
  }
}

Result<CpuWeight> prepare_weight(const hal::WeightDesc& d) {
  CpuWeight w;
  w.type = d.type;
  w.n_cols = d.ne[0];
  w.n_rows = d.ne[1] * d.ne[2] * d.ne[3];
  const int64_t n = w.n_cols * w.n_rows;
  if (!quant::is_ternary(d.type)) {
    BITNET_ASSIGN_OR_RETURN(uint64_t row_bytes, ggml_tensor_n_bytes(d.type, w.n_cols));
    w.raw = d.bytes;
    w.row_bytes = static_cast<int64_t>(row_bytes);
    if (w.n_rows == 1) {
      w.values.resize(static_cast<size_t>(w.n_cols));
      BITNET_RETURN_IF_ERROR(quant::dequantize(d.type, d.bytes, w.n_cols, w.values.data())
                                 .with_context(d.name));
    }
    return w;
  }
  if (w.n_cols % 128 != 0) {
    return unsupported(fmt::format("ternary tensor {} has rows of {} elements; the CPU kernels "
                                   "need a multiple of 128", d.name, w.n_cols));
  }
  auto rows = quant::decode_ternary_rows(d.type, d.bytes, w.n_cols, w.n_rows);
  if (!rows.ok()) return rows.status().with_context(d.name);
  w.ternary.packed.resize(static_cast<size_t>(n / 4));
  pack_ternary_rows(rows->codes.data(), w.n_rows, w.n_cols, w.ternary.packed.data());
  w.ternary.scale_block = rows->scale_block;
  w.ternary.scales = std::move(rows->scales);
  return w;
}

}  // namespace bitnet::cpu
