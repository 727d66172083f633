#include "backends/cpu/q6_K_lanes.h"

#include <array>
#include <bit>
#include <cstring>

#include "core/cpu_features.h"
#include "quant/q6_k.h"

namespace bitnet::cpu {
namespace {

constexpr int64_t kQ8_KQuantsAt = 4;  // after d (float)

// A lane-order block's three planes (q6_K_lanes.h) back into codes by position.
void plane_codes(const uint8_t* block, uint8_t codes[256]) {
  for (int x = 0; x < 64; ++x) codes[192 + x] = 0;
  for (int j = 0; j < 3; ++j) {
    for (int x = 0; x < 64; ++x) {
      const uint8_t b = block[64 * j + x];
      codes[64 * j + x] = b & 63;
      codes[192 + x] = static_cast<uint8_t>(codes[192 + x] | (b >> 6) << (2 * j));
    }
  }
}

static_assert(std::endian::native == std::endian::little, "file_codes4 reads byte k of a word as its bits 8k..8k+7");

uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 6-bit codes of elements e .. e+3 of a file-order block, one per byte (byte k: element
// e + k), for e a multiple of 4 that stays within one 32-element quarter: ggml stores element
// 128n + 32q + l as the low (q < 2) or high nibble of ql[64n + l + 32 (q & 1)] and bits 2q,
// 2q+1 of qh[32n + l]. Byte-wise shifts and masks of 32-bit words (little-endian), no carries
// between bytes.
uint32_t file_codes4(const uint8_t* block, int e) {
  const int n = e / 128, q = e % 128 / 32, l = e % 32;
  const uint32_t low = load32(block + 64 * n + l + 32 * (q & 1)) >> (4 * (q >> 1)) & 0x0F0F0F0Fu;
  const uint32_t high = load32(block + 128 + 32 * n + l) >> (2 * q) & 0x03030303u;
  return low | high << 4;
}

}  // namespace

// Plane j's bytes x .. x+3 (x a multiple of 4) hold the codes at positions 64j + x .. +3, which
// are elements 16 (x / 4) + 4j .. +3 (q6_K_lane_element), and bit pair j of those at 192 + x,
// elements 16 (x / 4) + 12 .. +3: four bytes at a time, straight from ggml's nibbles and pairs
// (about 6x fewer operations than unpacking, permuting and packing code by code: this runs over
// every block of the head at load).
void q6_K_block_to_lanes(const uint8_t* src, uint8_t* dst) {
  std::memcpy(dst + 192, src + 192, quant::kQ6_KBlockBytes - 192);  // scales, d
  for (int x = 0; x < 64; x += 4) {
    const int e = 16 * (x / 4);
    const uint32_t fourth = file_codes4(src, e + 12);
    for (int j = 0; j < 3; ++j) {
      const uint32_t plane = file_codes4(src, e + 4 * j) | (fourth >> (2 * j) & 0x03030303u) << 6;
      std::memcpy(dst + 64 * j + x, &plane, 4);
    }
  }
}

void q6_K_blocks_to_lanes(const uint8_t* src, uint8_t* dst, int64_t n_blocks) {
#if defined(__x86_64__)
  static const bool avx512 = [] {
    const CpuFeatures f = detect_cpu_features();
    return f.avx512f && f.avx512bw;
  }();
  if (avx512) {
    q6_K_blocks_to_lanes_avx512(src, dst, n_blocks);
    return;
  }
#endif
  for (int64_t b = 0; b < n_blocks; ++b) {
    q6_K_block_to_lanes(src + b * quant::kQ6_KBlockBytes, dst + b * quant::kQ6_KBlockBytes);
  }
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
    plane_codes(blk, lanes);
    for (int pos = 0; pos < 256; ++pos) codes[q6_K_lane_element(pos)] = lanes[pos];
    std::memcpy(file_order, blk, sizeof file_order);
    quant::q6_K_set_codes(codes, file_order);
    quant::q6_K_dequantize_block(file_order, dst + 256 * b);
  }
}

}  // namespace bitnet::cpu
