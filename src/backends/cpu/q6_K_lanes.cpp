#include "backends/cpu/q6_K_lanes.h"

#include <array>
#include <cstring>

#include "quant/q6_k.h"

namespace bitnet::cpu {
namespace {

constexpr int64_t kQ8_KQuantsAt = 4;  // after d (float)

}  // namespace

void q6_K_block_to_lanes(const uint8_t* src, uint8_t* dst) {
  uint8_t codes[256], lanes[256];
  quant::q6_K_codes(src, codes);
  for (int pos = 0; pos < 256; ++pos) lanes[pos] = codes[q6_K_lane_element(pos)];
  std::memcpy(dst, src, quant::kQ6_KBlockBytes);  // scales, d
  quant::q6_K_set_codes(lanes, dst);
}

void q8_K_block_to_lanes(uint8_t* block) {
  std::array<uint8_t, 256> q;
  std::memcpy(q.data(), block + kQ8_KQuantsAt, q.size());
  for (int pos = 0; pos < 256; ++pos) block[kQ8_KQuantsAt + pos] = q[static_cast<size_t>(q6_K_lane_element(pos))];
}

void dequantize_q6_K_lanes_row(const uint8_t* row, int64_t n_cols, float* dst) {
  for (int64_t b = 0; b < n_cols / 256; ++b) {
    // The block back in the file's order, then ggml's dequantizer.
    const uint8_t* blk = row + b * quant::kQ6_KBlockBytes;
    uint8_t lanes[256], codes[256], file_order[quant::kQ6_KBlockBytes];
    quant::q6_K_codes(blk, lanes);
    for (int pos = 0; pos < 256; ++pos) codes[q6_K_lane_element(pos)] = lanes[pos];
    std::memcpy(file_order, blk, sizeof file_order);
    quant::q6_K_set_codes(codes, file_order);
    quant::q6_K_dequantize_block(file_order, dst + 256 * b);
  }
}

}  // namespace bitnet::cpu
