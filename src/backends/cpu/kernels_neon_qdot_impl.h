// NEON sets, quantized-activation row dots (KernelSet::quant_dot): the llama.cpp weight types
// against 8-bit activation blocks (quant::vec_dot_type), the block sums in integers exactly as
// the scalar twins (quant::vec_dot_fn) compute them, the float accumulation in another order.
// Types without a dot here get the twin.
//
// Included by two files, each compiled with its own flags (as the shared drivers are):
// kernels_neon_qdot.cpp makes it neon::quant_dot, baseline Advanced SIMD, where a 16-byte dot is
// vmull_s8 into int16 and vpadalq_s16 into int32; kernels_neon_dotprod_qdot.cpp defines
// BITNET_NEON_QDOT_SDOT (and compiles with -march=+dotprod) for neon_dotprod::quant_dot, the
// same kernels with SDOT (vdotq_s32) as that dot. Every helper is in an anonymous namespace,
// so each compilation keeps its own copy (CMakeLists.txt).
// Little-endian byte order (every AArch64 Linux target) is assumed for the packed fields.
#include <arm_neon.h>

#include <cstring>

#include "backends/cpu/kernels_neon.h"
#include "quant/iq4.h"

#ifdef BITNET_NEON_QDOT_SDOT
namespace bitnet::cpu::neon_dotprod {
#else
namespace bitnet::cpu::neon {
#endif

namespace {

float load_fp16(const uint8_t* p) {
  __fp16 h;
  std::memcpy(&h, p, 2);
  return static_cast<float>(h);
}

float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

const int8_t* as_i8(const uint8_t* p) { return reinterpret_cast<const int8_t*>(p); }
int8x16_t as_s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

// acc + w[i] * a[i] over 16 int8 pairs, spread over the 4 lanes (which lane holds which products
// differs between the two builds; the kernels only ever add the lanes up).
int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t a) {
#ifdef BITNET_NEON_QDOT_SDOT
  return vdotq_s32(acc, w, a);
#else
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(a)));
  return vpadalq_s16(acc, vmull_high_s8(w, a));
#endif
}

// Two dot16 for weights of at most 6 bits (|w| <= 63, |a| <= 128): without SDOT the 32 products
// of both halves meet in one int16 sum (4 * 63 * 128 < 32768) before a single vpadalq_s16.
int32x4_t dot32_small(int32x4_t acc, int8x16_t w0, int8x16_t a0, int8x16_t w1, int8x16_t a1) {
#ifdef BITNET_NEON_QDOT_SDOT
  return vdotq_s32(vdotq_s32(acc, w0, a0), w1, a1);
#else
  int16x8_t p = vmull_s8(vget_low_s8(w0), vget_low_s8(a0));
  p = vmlal_high_s8(p, w0, a0);
  p = vmlal_s8(p, vget_low_s8(w1), vget_low_s8(a1));
  p = vmlal_high_s8(p, w1, a1);
  return vpadalq_s16(acc, p);
#endif
}

// The same over 16 products.
int32x4_t dot16_small(int32x4_t acc, int8x16_t w, int8x16_t a) {
#ifdef BITNET_NEON_QDOT_SDOT
  return vdotq_s32(acc, w, a);
#else
  return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(a)), w, a));
#endif
}

// acc + {sum of p[0], ..., sum of p[3]} * scales: four 16-element dots scaled at once.
int32x4_t add_scaled(int32x4_t acc, const int32x4_t p[4], int32x4_t scales) {
  return vmlaq_s32(acc, vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3])), scales);
}

// The fifth bits of a Q5_0 / Q5_1 block (qh: bit j of the little-endian uint32 is element j's)
// as bytes 0 or 16: fifth[0] for elements 0-15, fifth[1] for 16-31. Each qh byte is spread over
// 8 lanes and tested against the lane's bit.
void q5_fifth_bits(const uint8_t* qh, uint8x16_t fifth[2]) {
  const uint8x16_t lane_bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
  const uint8x16_t sixteen = vdupq_n_u8(16);
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t bytes = vcombine_u8(vdup_n_u8(qh[2 * h]), vdup_n_u8(qh[2 * h + 1]));
    fifth[h] = vandq_u8(vtstq_u8(bytes, lane_bit), sixteen);
  }
}

// The sum of block(wb, ab) over the n / 32 blocks of a 32-element type (kWBytes per weight
// block, kABytes per activation block), each block's float32x4 of partial sums. Even and odd
// blocks go to two accumulators, so that one block's float add does not wait on the last one's.
template <int64_t kWBytes, int64_t kABytes, typename Block>
float sum_blocks32(int64_t n, const uint8_t* w, const uint8_t* a, Block block) {
  const int64_t n_blocks = n / 32;
  float32x4_t acc0 = vdupq_n_f32(0.0f);
  float32x4_t acc1 = vdupq_n_f32(0.0f);
  int64_t b = 0;
  for (; b + 2 <= n_blocks; b += 2) {
    acc0 = vaddq_f32(acc0, block(w + b * kWBytes, a + b * kABytes));
    acc1 = vaddq_f32(acc1, block(w + (b + 1) * kWBytes, a + (b + 1) * kABytes));
  }
  if (b < n_blocks) acc0 = vaddq_f32(acc0, block(w + b * kWBytes, a + b * kABytes));
  return vaddvq_f32(vaddq_f32(acc0, acc1));
}

// A block's int32 lanes times d_w * d_a (the fp16 scales at the start of both blocks).
float32x4_t scaled(int32x4_t s, const uint8_t* wb, const uint8_t* ab) {
  return vmulq_n_f32(vcvtq_f32_s32(s), load_fp16(wb) * load_fp16(ab));
}

// The same plus the min term m_w * s_a of Q4_1 / Q5_1 against Q8_1 (fp16 m at wb + 2, fp16
// s = d_a * sum q at ab + 2), carried in lane 0.
float32x4_t scaled_with_min(int32x4_t s, const uint8_t* wb, const uint8_t* ab) {
  const float32x4_t min_term = vsetq_lane_f32(load_fp16(wb + 2) * load_fp16(ab + 2), vdupq_n_f32(0.0f), 0);
  return vmlaq_n_f32(min_term, vcvtq_f32_s32(s), load_fp16(wb) * load_fp16(ab));
}

// Q8_0 (34 bytes: fp16 d, int8 qs[32]) against Q8_0: two full-range int8 dots per block.
float dot_q8_0_q8_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  return sum_blocks32<34, 34>(n, w, a, [](const uint8_t* wb, const uint8_t* ab) {
    const int32x4_t s = dot16(vdupq_n_s32(0), vld1q_s8(as_i8(wb + 2)), vld1q_s8(as_i8(ab + 2)));
    return scaled(dot16(s, vld1q_s8(as_i8(wb + 18)), vld1q_s8(as_i8(ab + 18))), wb, ab);
  });
}

// Q4_0 (18 bytes: fp16 d, qs[16] with element j in the low nibble of qs[j] and j + 16 in the
// high one) against Q8_0: the nibbles minus 8 are int8 codes in [-8, 7].
float dot_q4_0_q8_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  return sum_blocks32<18, 34>(n, w, a, [](const uint8_t* wb, const uint8_t* ab) {
    const uint8x16_t qs = vld1q_u8(wb + 2);
    const int8x16_t lo = vsubq_s8(as_s8(vandq_u8(qs, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    const int8x16_t hi = vsubq_s8(as_s8(vshrq_n_u8(qs, 4)), vdupq_n_s8(8));
    return scaled(dot32_small(vdupq_n_s32(0), lo, vld1q_s8(as_i8(ab + 2)), hi, vld1q_s8(as_i8(ab + 18))), wb, ab);
  });
}

// Q4_1 (20 bytes: fp16 d, fp16 m, qs[16] as Q4_0) against Q8_1 (fp16 d, fp16 s = d * sum q, int8
// qs[32]): the codes 0..15 as they are; the min term m_w * s_a needs no integers.
float dot_q4_1_q8_1(int64_t n, const uint8_t* w, const uint8_t* a) {
  return sum_blocks32<20, 36>(n, w, a, [](const uint8_t* wb, const uint8_t* ab) {
    const uint8x16_t qs = vld1q_u8(wb + 4);
    const int8x16_t lo = as_s8(vandq_u8(qs, vdupq_n_u8(0x0f)));
    const int8x16_t hi = as_s8(vshrq_n_u8(qs, 4));
    return scaled_with_min(dot32_small(vdupq_n_s32(0), lo, vld1q_s8(as_i8(ab + 4)), hi, vld1q_s8(as_i8(ab + 20))),
                           wb, ab);
  });
}

// Q5_0 (22 bytes: fp16 d, qh[4], qs[16] as Q4_0) against Q8_0: nibble | fifth bit, minus 16,
// is an int8 code in [-16, 15].
float dot_q5_0_q8_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  return sum_blocks32<22, 34>(n, w, a, [](const uint8_t* wb, const uint8_t* ab) {
    uint8x16_t fifth[2];
    q5_fifth_bits(wb + 2, fifth);
    const uint8x16_t qs = vld1q_u8(wb + 6);
    const int8x16_t lo = vsubq_s8(as_s8(vorrq_u8(vandq_u8(qs, vdupq_n_u8(0x0f)), fifth[0])), vdupq_n_s8(16));
    const int8x16_t hi = vsubq_s8(as_s8(vorrq_u8(vshrq_n_u8(qs, 4), fifth[1])), vdupq_n_s8(16));
    return scaled(dot32_small(vdupq_n_s32(0), lo, vld1q_s8(as_i8(ab + 2)), hi, vld1q_s8(as_i8(ab + 18))), wb, ab);
  });
}

// Q5_1 (24 bytes: fp16 d, fp16 m, qh[4], qs[16]) against Q8_1: as Q4_1 with the codes
// nibble | fifth bit in [0, 31].
float dot_q5_1_q8_1(int64_t n, const uint8_t* w, const uint8_t* a) {
  return sum_blocks32<24, 36>(n, w, a, [](const uint8_t* wb, const uint8_t* ab) {
    uint8x16_t fifth[2];
    q5_fifth_bits(wb + 4, fifth);
    const uint8x16_t qs = vld1q_u8(wb + 8);
    const int8x16_t lo = as_s8(vorrq_u8(vandq_u8(qs, vdupq_n_u8(0x0f)), fifth[0]));
    const int8x16_t hi = as_s8(vorrq_u8(vshrq_n_u8(qs, 4), fifth[1]));
    return scaled_with_min(dot32_small(vdupq_n_s32(0), lo, vld1q_s8(as_i8(ab + 4)), hi, vld1q_s8(as_i8(ab + 20))),
                           wb, ab);
  });
}

// IQ4_NL (18 bytes: fp16 d, qs[16] as Q4_0) against Q8_0: the nibbles index the 16 table values
// (one TBL per half); the values reach -127, so the full-range dot16.
float dot_iq4_nl_q8_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  const int8x16_t table = vld1q_s8(quant::kIq4NlValues);
  return sum_blocks32<18, 34>(n, w, a, [table](const uint8_t* wb, const uint8_t* ab) {
    const uint8x16_t qs = vld1q_u8(wb + 2);
    const int32x4_t s =
        dot16(vdupq_n_s32(0), vqtbl1q_s8(table, vandq_u8(qs, vdupq_n_u8(0x0f))), vld1q_s8(as_i8(ab + 2)));
    return scaled(dot16(s, vqtbl1q_s8(table, vshrq_n_u8(qs, 4)), vld1q_s8(as_i8(ab + 18))), wb, ab);
  });
}

// The 8 sub-block scales (bytes 0-7) and 8 mins (bytes 8-15) of a Q4_K / Q5_K block from its
// 12 packed bytes (get_scale_min_k4 in quant/k_quant_util.h), four at a time in uint32 words:
// bytes 0-3 hold scales 0-3 and the top 2 bits of scales 4-7, bytes 4-7 mins 0-3 and the top
// bits of mins 4-7, bytes 8-11 the low nibbles of scales 4-7 (low) and mins 4-7 (high).
void unpack_scales_mins(const uint8_t* packed, uint8_t out[16]) {
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  const uint32_t six = 0x3f3f3f3f, four = 0x0f0f0f0f, two = 0x03030303;
  const uint32_t r[4] = {u[0] & six, (u[2] & four) | ((u[0] >> 6) & two) << 4, u[1] & six,
                         ((u[2] >> 4) & four) | ((u[1] >> 6) & two) << 4};
  std::memcpy(out, r, 16);
}

// sum_j mins[j] * (the sum of the 32 activations of sub-block j), from the Q8_K bsums
// (16-element sums, adjacent pairs added in int16: |sum| <= 32 * 127).
int32_t min_term(const uint8_t* q8k, const uint8_t* mins8) {
  const int16_t* bsums = reinterpret_cast<const int16_t*>(q8k + 260);
  const int16x8_t sums = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
  const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mins8)));
  return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(sums), vget_low_s16(mins)), sums, mins));
}

// sum_g bsums[g] * f[g] over the 16 Q8_K bsums (16-element sums), f[0..7] in lo and f[8..15] in hi.
int32_t bsums_dot(const uint8_t* q8k, int16x8_t lo, int16x8_t hi) {
  const int16_t* bsums = reinterpret_cast<const int16_t*>(q8k + 260);
  const int16x8_t b_lo = vld1q_s16(bsums);
  const int16x8_t b_hi = vld1q_s16(bsums + 8);
  int32x4_t s = vmull_s16(vget_low_s16(lo), vget_low_s16(b_lo));
  s = vmlal_high_s16(s, lo, b_lo);
  s = vmlal_s16(s, vget_low_s16(hi), vget_low_s16(b_hi));
  return vaddvq_s32(vmlal_high_s16(s, hi, b_hi));
}

// Q4_K (144 bytes: fp16 d, fp16 dmin, scales[12], qs[128]: 64-element chunk c in qs[32c..32c+31],
// sub-block 2c in the low nibbles, 2c + 1 in the high ones) against Q8_K (float d, int8 qs[256],
// int16 bsums[16]): one 32-element dot per sub-block times its scale in int32; the mins come
// from the bsums (min_term). Q5_K (kQ5; 176 bytes: fp16 d, fp16 dmin, scales[12], qh[32],
// qs[128] as Q4_K's): the fifth bit of element 64c + 32k + l is bit 2c + k of qh[l], moved to
// bit 4 of the nibble; qh shifts down by 2 per chunk.
template <bool kQ5>
float dot_q45_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  constexpr int64_t kBlockBytes = kQ5 ? 176 : 144;
  constexpr int64_t kQs = kQ5 ? 48 : 16;  // offset of qs in the block
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  const uint8x16_t bit0 = vdupq_n_u8(1);
  const uint8x16_t bit1 = vdupq_n_u8(2);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* wb = w + b * kBlockBytes;
    const uint8_t* ab = a + b * 292;
    uint8_t sm[16];
    unpack_scales_mins(wb + 4, sm);
    const int8_t* q8 = as_i8(ab + 4);
    uint8x16_t qh0 = kQ5 ? vld1q_u8(wb + 16) : vdupq_n_u8(0);
    uint8x16_t qh1 = kQ5 ? vld1q_u8(wb + 32) : vdupq_n_u8(0);
    int32x4_t isum = vdupq_n_s32(0);
    for (int c = 0; c < 4; ++c) {
      const uint8x16_t q0 = vld1q_u8(wb + kQs + 32 * c);
      const uint8x16_t q1 = vld1q_u8(wb + kQs + 16 + 32 * c);
      uint8x16_t lo0 = vandq_u8(q0, low4), lo1 = vandq_u8(q1, low4);
      uint8x16_t hi0 = vshrq_n_u8(q0, 4), hi1 = vshrq_n_u8(q1, 4);
      if constexpr (kQ5) {
        lo0 = vorrq_u8(lo0, vshlq_n_u8(vandq_u8(qh0, bit0), 4));
        lo1 = vorrq_u8(lo1, vshlq_n_u8(vandq_u8(qh1, bit0), 4));
        hi0 = vorrq_u8(hi0, vshlq_n_u8(vandq_u8(qh0, bit1), 3));
        hi1 = vorrq_u8(hi1, vshlq_n_u8(vandq_u8(qh1, bit1), 3));
        qh0 = vshrq_n_u8(qh0, 2);
        qh1 = vshrq_n_u8(qh1, 2);
      }
      const int8_t* x = q8 + 64 * c;
      const int32x4_t lo = dot32_small(vdupq_n_s32(0), as_s8(lo0), vld1q_s8(x), as_s8(lo1), vld1q_s8(x + 16));
      const int32x4_t hi = dot32_small(vdupq_n_s32(0), as_s8(hi0), vld1q_s8(x + 32), as_s8(hi1), vld1q_s8(x + 48));
      isum = vmlaq_n_s32(isum, lo, sm[2 * c]);
      isum = vmlaq_n_s32(isum, hi, sm[2 * c + 1]);
    }
    const float d_a = load_f32(ab);
    sum += load_fp16(wb) * d_a * static_cast<float>(vaddvq_s32(isum)) -
           load_fp16(wb + 2) * d_a * static_cast<float>(min_term(ab, sm + 8));
  }
  return sum;
}

// Q6_K (210 bytes: ql[128], qh[64], int8 scales[16], fp16 d; element 128h + 32k + l is a nibble
// of ql[64h + 32(k % 2) + l], low for k < 2, under bits 2k, 2k+1 of qh[32h + l]) against Q8_K:
// the codes 0..63 as they are in 16-element dots, four scales applied at once (add_scaled); the
// "- 32" of every code is taken once per block as 32 * sum_g scale_g * bsums_g.
float dot_q6_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  const uint8x16_t low2 = vdupq_n_u8(3);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* wb = w + b * 210;
    const uint8_t* ab = a + b * 292;
    const int8_t* q8 = as_i8(ab + 4);
    const int8x16_t sc8 = vld1q_s8(as_i8(wb + 192));
    const int16x8_t sc_lo = vmovl_s8(vget_low_s8(sc8));
    const int16x8_t sc_hi = vmovl_high_s8(sc8);
    int32x4_t isum = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t ql[4] = {vld1q_u8(wb + 64 * h), vld1q_u8(wb + 64 * h + 16), vld1q_u8(wb + 64 * h + 32),
                                vld1q_u8(wb + 64 * h + 48)};
      uint8x16_t qh[2] = {vld1q_u8(wb + 128 + 32 * h), vld1q_u8(wb + 144 + 32 * h)};
      for (int kk = 0; kk < 4; kk += 2) {  // scales 8h + 2kk .. 8h + 2kk + 3
        int32x4_t p[4];
        for (int i = 0; i < 4; ++i) {  // k = kk + i / 2, l in [16j, 16j + 16) for j = i % 2
          const int k = kk + i / 2;
          const int j = i % 2;
          const uint8x16_t bits = ql[2 * (k % 2) + j];
          const uint8x16_t nibble = k < 2 ? vandq_u8(bits, low4) : vshrq_n_u8(bits, 4);
          const uint8x16_t q = vorrq_u8(nibble, vshlq_n_u8(vandq_u8(qh[j], low2), 4));
          qh[j] = vshrq_n_u8(qh[j], 2);
          p[i] = dot16_small(vdupq_n_s32(0), as_s8(q), vld1q_s8(q8 + 128 * h + 32 * kk + 16 * i));
        }
        const int16x8_t s16 = h == 0 ? sc_lo : sc_hi;
        isum = add_scaled(isum, p, kk == 0 ? vmovl_s16(vget_low_s16(s16)) : vmovl_high_s16(s16));
      }
    }
    const int32_t total = vaddvq_s32(isum) - 32 * bsums_dot(ab, sc_lo, sc_hi);
    sum += load_fp16(wb + 208) * load_f32(ab) * static_cast<float>(total);
  }
  return sum;
}

// Q2_K (84 bytes: scales[16] with scale sc in the low nibble and min m in the high one per
// 16-element sub-block, qs[64], fp16 d, fp16 dmin; element 128h + 32j + r is bits 2j, 2j+1 of
// qs[32h + r]) against Q8_K: codes 0..3 in 16-element dots, four sub-blocks scaled at once
// (add_scaled); the mins come from the bsums.
float dot_q2_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const uint8x16_t low2 = vdupq_n_u8(3);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* wb = w + b * 84;
    const uint8_t* ab = a + b * 292;
    const int8_t* q8 = as_i8(ab + 4);
    const uint8x16_t packed = vld1q_u8(wb);
    const uint8x16_t scales = vandq_u8(packed, vdupq_n_u8(0x0f));
    const uint8x16_t mins = vshrq_n_u8(packed, 4);
    const int16x8_t sc[2] = {vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(scales))),
                             vreinterpretq_s16_u16(vmovl_high_u8(scales))};
    const int32_t min_sum = bsums_dot(ab, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins))),
                                      vreinterpretq_s16_u16(vmovl_high_u8(mins)));
    int32x4_t isum = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      uint8x16_t qs[2] = {vld1q_u8(wb + 16 + 32 * h), vld1q_u8(wb + 32 + 32 * h)};
      for (int jj = 0; jj < 4; jj += 2) {  // sub-blocks 8h + 2jj .. 8h + 2jj + 3
        int32x4_t p[4];
        for (int k = 0; k < 4; ++k) {  // j = jj + k / 2, r in [16(k % 2), 16(k % 2) + 16)
          const int8x16_t q = as_s8(vandq_u8(qs[k % 2], low2));
          if (k % 2 == 1) {
            qs[0] = vshrq_n_u8(qs[0], 2);
            qs[1] = vshrq_n_u8(qs[1], 2);
          }
          p[k] = dot16_small(vdupq_n_s32(0), q, vld1q_s8(q8 + 128 * h + 32 * jj + 16 * k));
        }
        isum = add_scaled(isum, p, jj == 0 ? vmovl_s16(vget_low_s16(sc[h])) : vmovl_high_s16(sc[h]));
      }
    }
    const float d_a = load_f32(ab);
    sum += d_a * load_fp16(wb + 80) * static_cast<float>(vaddvq_s32(isum)) -
           d_a * load_fp16(wb + 82) * static_cast<float>(min_sum);
  }
  return sum;
}

// The 16 signed scales (6-bit scale - 32) of a Q3_K block from its 12 packed bytes (quant/q2_k_q3_k.h):
// byte s of word s / 4 takes the low nibble of scales[s % 8] (high nibble for s >= 8) under
// bits 2(s/4), 2(s/4)+1 of scales[8 + s % 4].
int8x16_t q3_K_scales(const uint8_t* packed) {
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  const uint32_t four = 0x0f0f0f0f, two = 0x03030303;
  const uint32_t r[4] = {(u[0] & four) | (u[2] & two) << 4, (u[1] & four) | ((u[2] >> 2) & two) << 4,
                         ((u[0] >> 4) & four) | ((u[2] >> 4) & two) << 4,
                         ((u[1] >> 4) & four) | ((u[2] >> 6) & two) << 4};
  return vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(r)), vdupq_n_s8(32));
}

// Q3_K (110 bytes: hmask[32], qs[64] as Q2_K's, scales[12], fp16 d; the high bit of element
// 128h + 32j + r is bit 4h + j of hmask[r]) against Q8_K: code = low 2 bits - 4 where the high
// bit is clear, in [-4, 3]; 16-element dots, four sub-blocks scaled at once (add_scaled).
float dot_q3_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const uint8x16_t low2 = vdupq_n_u8(3);
  const uint8x16_t one = vdupq_n_u8(1);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* wb = w + b * 110;
    const uint8_t* ab = a + b * 292;
    const int8_t* q8 = as_i8(ab + 4);
    const int8x16_t sc8 = q3_K_scales(wb + 96);
    const int16x8_t sc[2] = {vmovl_s8(vget_low_s8(sc8)), vmovl_high_s8(sc8)};
    uint8x16_t hm[2] = {vld1q_u8(wb), vld1q_u8(wb + 16)};
    int32x4_t isum = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      uint8x16_t qs[2] = {vld1q_u8(wb + 32 + 32 * h), vld1q_u8(wb + 48 + 32 * h)};
      for (int jj = 0; jj < 4; jj += 2) {  // as in Q2_K
        int32x4_t p[4];
        for (int k = 0; k < 4; ++k) {
          const uint8x16_t missing_high = vbicq_u8(one, hm[k % 2]);  // 1 where the high bit is clear
          const int8x16_t q = vsubq_s8(as_s8(vandq_u8(qs[k % 2], low2)), as_s8(vshlq_n_u8(missing_high, 2)));
          if (k % 2 == 1) {
            for (int i = 0; i < 2; ++i) {
              qs[i] = vshrq_n_u8(qs[i], 2);
              hm[i] = vshrq_n_u8(hm[i], 1);
            }
          }
          p[k] = dot16_small(vdupq_n_s32(0), q, vld1q_s8(q8 + 128 * h + 32 * jj + 16 * k));
        }
        isum = add_scaled(isum, p, jj == 0 ? vmovl_s16(vget_low_s16(sc[h])) : vmovl_high_s16(sc[h]));
      }
    }
    sum += load_fp16(wb + 108) * load_f32(ab) * static_cast<float>(vaddvq_s32(isum));
  }
  return sum;
}

// IQ4_XS (136 bytes: fp16 d, scales_h (2 bits per sub-block), scales_l[4] (a nibble per
// sub-block), qs[128]: sub-block s of 32 in qs[16s..16s+15] as an IQ4_NL block) against Q8_K:
// table values through TBL, full-range dot16, each sub-block's int32 sum times its scale - 32.
float dot_iq4_xs_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const int8x16_t table = vld1q_s8(quant::kIq4NlValues);
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* wb = w + b * 136;
    const uint8_t* ab = a + b * 292;
    const int8_t* q8 = as_i8(ab + 4);
    const uint32_t scales_h = static_cast<uint32_t>(wb[2] | wb[3] << 8);
    int32_t isum = 0;
    for (int s = 0; s < 8; ++s) {
      const uint8x16_t qs = vld1q_u8(wb + 8 + 16 * s);
      int32x4_t p = dot16(vdupq_n_s32(0), vqtbl1q_s8(table, vandq_u8(qs, low4)), vld1q_s8(q8 + 32 * s));
      p = dot16(p, vqtbl1q_s8(table, vshrq_n_u8(qs, 4)), vld1q_s8(q8 + 32 * s + 16));
      const int scale = ((wb[4 + s / 2] >> (4 * (s % 2))) & 0xf) | ((scales_h >> (2 * s)) & 3) << 4;
      isum += (scale - 32) * vaddvq_s32(p);
    }
    sum += load_fp16(wb) * load_f32(ab) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace

QuantDotFn quant_dot(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return dot_q4_0_q8_0;
    case GgmlType::kQ4_1: return dot_q4_1_q8_1;
    case GgmlType::kQ8_0: return dot_q8_0_q8_0;
    case GgmlType::kQ4_K: return dot_q45_K_q8_K<false>;
    case GgmlType::kQ5_K: return dot_q45_K_q8_K<true>;
    case GgmlType::kQ6_K: return dot_q6_K_q8_K;
    case GgmlType::kQ5_0: return dot_q5_0_q8_0;
    case GgmlType::kQ5_1: return dot_q5_1_q8_1;
    case GgmlType::kQ2_K: return dot_q2_K_q8_K;
    case GgmlType::kQ3_K: return dot_q3_K_q8_K;
    case GgmlType::kIQ4_NL: return dot_iq4_nl_q8_0;
    case GgmlType::kIQ4_XS: return dot_iq4_xs_q8_K;
    default: return quant::vec_dot_fn(type);
  }
}

}  // namespace bitnet::cpu::neon or neon_dotprod
