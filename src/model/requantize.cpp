#include "model/requantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <thread>

#include "quant/quant.h"

namespace bitnet {

Result<GgmlType> parse_head_type(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "f16") return GgmlType::kF16;
  if (lower == "q8_0") return GgmlType::kQ8_0;
  if (lower == "q6_k") return GgmlType::kQ6_K;
  return invalid_argument(fmt::format("unknown head type '{}' (expected f16, q8_0 or q6_K)", name));
}

namespace {

int64_t n_rows_of(const hal::WeightDesc& w) { return w.ne[1] * w.ne[2] * w.ne[3]; }

// Bytes of one row of `w` as `type`, or why its rows are not whole blocks of it.
Result<uint64_t> requantized_row_bytes(const hal::WeightDesc& w, GgmlType type) {
  auto row_bytes = ggml_tensor_n_bytes(type, w.ne[0]);
  if (!row_bytes.ok()) return row_bytes.status().with_context(fmt::format("{} as {}", w.name, ggml_type_name(type)));
  return *row_bytes;
}

}  // namespace

Result<uint64_t> requantized_bytes(const hal::WeightDesc& w, GgmlType type) {
  BITNET_ASSIGN_OR_RETURN(const uint64_t row_bytes, requantized_row_bytes(w, type));
  return row_bytes * static_cast<uint64_t>(n_rows_of(w));
}

Result<std::vector<uint8_t>> requantize_rows(const hal::WeightDesc& w, GgmlType type, int n_threads) {
  BITNET_ASSIGN_OR_RETURN(const uint64_t n_bytes, requantized_bytes(w, type));
  std::vector<uint8_t> out(static_cast<size_t>(n_bytes));
  BITNET_RETURN_IF_ERROR(requantize_rows_into(w, type, n_threads, out));
  return out;
}

Status requantize_rows_into(const hal::WeightDesc& w, GgmlType type, int n_threads, std::span<uint8_t> out) {
  const int64_t n_cols = w.ne[0];
  const int64_t n_rows = n_rows_of(w);
  BITNET_ASSIGN_OR_RETURN(const uint64_t src_row_bytes, ggml_tensor_n_bytes(w.type, n_cols));
  BITNET_ASSIGN_OR_RETURN(const uint64_t dst_row_bytes, requantized_row_bytes(w, type));
  const uint64_t n_bytes = dst_row_bytes * static_cast<uint64_t>(n_rows);
  if (!quant::can_dequantize(w.type)) {
    return unsupported(fmt::format("{}: cannot requantize a {} tensor", w.name, ggml_type_name(w.type)));
  }
  if (out.size() != n_bytes) {
    return invalid_argument(fmt::format("{}: {} bytes of output for {} requantized bytes", w.name, out.size(), n_bytes));
  }
  // Each thread converts a contiguous range of rows; the first error wins.
  const int64_t n_workers = std::clamp<int64_t>(n_threads > 0 ? n_threads : std::thread::hardware_concurrency(), 1, 64);
  const int64_t per_worker = (n_rows + n_workers - 1) / n_workers;
  std::vector<Status> status(static_cast<size_t>(n_workers));
  const auto convert = [&](int64_t worker) {
    std::vector<float> row(static_cast<size_t>(n_cols));
    const int64_t r1 = std::min(n_rows, (worker + 1) * per_worker);
    for (int64_t r = worker * per_worker; r < r1; ++r) {
      const auto src = w.bytes.subspan(static_cast<size_t>(r * static_cast<int64_t>(src_row_bytes)), src_row_bytes);
      Status s = quant::dequantize(w.type, src, n_cols, row.data());
      auto q = s.ok() ? quant::quantize(type, row.data(), 1, n_cols) : Result<std::vector<uint8_t>>(s);
      if (!q.ok()) {
        status[static_cast<size_t>(worker)] = q.status().with_context(fmt::format("{} row {}", w.name, r));
        return;
      }
      std::copy(q->begin(), q->end(), out.begin() + r * static_cast<int64_t>(dst_row_bytes));
    }
  };
  std::vector<std::thread> threads;
  for (int64_t i = 1; i < n_workers; ++i) threads.emplace_back(convert, i);
  convert(0);
  for (std::thread& t : threads) t.join();
  for (const Status& s : status) BITNET_RETURN_IF_ERROR(s);
  return {};
}

}  // namespace bitnet
