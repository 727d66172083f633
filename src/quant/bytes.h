// Little-endian loads and stores of the scalars inside weight blocks. Block bytes come from
// mapped files with no alignment guarantee, so every access goes through memcpy.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace bitnet::quant {

static_assert(std::endian::native == std::endian::little,
              "GGUF tensor data is little-endian; a big-endian host needs byte swaps here");

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof(v)); }

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof(v)); }

inline float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void store_f32(uint8_t* p, float v) { std::memcpy(p, &v, sizeof(v)); }

}  // namespace bitnet::quant
