// Shared helpers of the compute shaders. Every shader uses descriptor set 0 with up to six
// storage buffers (unused ones are bound to a dummy buffer) and <= 64 bytes of push constants.

// a / b rounded to nearest even, exactly as IEEE float division (Vulkan only promises 2.5 ULP
// for OpFDiv, and the W2A8 path must match the CPU bit for bit). Long division of the 24-bit
// mantissas in integers; a, b finite and normal, a result outside the normal range falls back.
float cr_div(float a, float b) {
  if (a == 0.0) return 0.0;
  uint ua = floatBitsToUint(a);
  uint ub = floatBitsToUint(b);
  uint sign = (ua ^ ub) & 0x80000000u;
  int ea = int((ua >> 23) & 0xffu);
  int eb = int((ub >> 23) & 0xffu);
  if (ea == 0 || eb == 0 || ea == 255 || eb == 255) return a / b;
  uint ma = (ua & 0x7fffffu) | 0x800000u;
  uint mb = (ub & 0x7fffffu) | 0x800000u;
  int e = ea - eb;
  if (ma < mb) {
    ma <<= 1;
    e -= 1;
  }
  // ma / mb in [1, 2): 24 quotient bits plus a guard bit; the remainder is the sticky bit.
  uint qv = 0u;
  uint rem = ma;
  for (int i = 0; i < 25; ++i) {
    qv <<= 1;
    if (rem >= mb) {
      rem -= mb;
      qv |= 1u;
    }
    rem <<= 1;
  }
  uint mant = qv >> 1;
  if ((qv & 1u) == 1u && (rem != 0u || (mant & 1u) == 1u)) mant += 1u;
  int be = e + 127;
  if (be <= 0 || be >= 255) return a / b;
  return uintBitsToFloat(sign | ((uint(be - 1) << 23) + mant));
}

// Weight element types of the float path (spec constant TYPE in embed / matmul_float).
const uint kTypeF32 = 0u;
const uint kTypeF16 = 1u;
const uint kTypeBF16 = 2u;
const uint kTypeQ8_0 = 3u;
// llama.cpp's block formats, stored as the file's blocks (weight_fetch.glsl).
const uint kTypeQ4_0 = 4u;
const uint kTypeQ4_1 = 5u;
const uint kTypeQ5_0 = 6u;
const uint kTypeQ5_1 = 7u;
const uint kTypeQ2_K = 8u;
const uint kTypeQ3_K = 9u;
const uint kTypeQ4_K = 10u;
const uint kTypeQ5_K = 11u;
const uint kTypeQ6_K = 12u;
const uint kTypeIQ4_NL = 13u;
const uint kTypeIQ4_XS = 14u;
