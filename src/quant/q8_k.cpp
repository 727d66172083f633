#include "quant/q8_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/bytes.h"
#include "quant/k_quant_util.h"

namespace bitnet::quant {

void q8_K_quantize_block(const float* x, uint8_t* dst) {
  float amax = 0.0f;
  const float max = max_by_magnitude(x, kQK_K, &amax);  // with its sign
  if (amax == 0.0f) {
    std::memset(dst, 0, kQ8_KBlockBytes);
    return;
  }
  // -127 rather than -128: ggml's IQ2_XXS AVX kernel needs |qs| <= 127.
  const float iscale = -127.0f / max;
  auto* qs = reinterpret_cast<int8_t*>(dst + 4);
  for (int64_t j = 0; j < kQK_K; ++j) {
    qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
  }
  for (int g = 0; g < kQK_K / 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += qs[16 * g + i];
    store_u16(dst + 260 + 2 * g, static_cast<uint16_t>(static_cast<int16_t>(sum)));
  }
  store_f32(dst, 1.0f / iscale);
}

void q8_K_dequantize_block(const uint8_t* src, float* y) {
  const float d = q8_K_d(src);
  const int8_t* qs = q8_K_qs(src);
  for (int64_t j = 0; j < kQK_K; ++j) y[j] = d * static_cast<float>(qs[j]);
}

float q8_K_d(const uint8_t* block) { return load_f32(block); }

int16_t q8_K_bsum(const uint8_t* block, int g) {
  return static_cast<int16_t>(load_u16(block + 260 + 2 * g));
}

}  // namespace bitnet::quant
