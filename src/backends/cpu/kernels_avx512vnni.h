// AVX-512 VNNI set: the one choice it makes by microarchitecture (kernels_avx512vnni.cpp).
#pragma once

namespace bitnet::cpu::avx512vnni {

// How the T5 prefill tiles decode a position's 64 codes (as 64 x code, for vpdpbusd); both give
// the same bytes. kAverage: three vpavgb and two vpandq, which Zen 4 runs beside vpdpbusd (its
// compares into mask registers take vpdpbusd's pipes). kCompare: two vpcmpub into mask
// registers and two masked moves, which Zen 5 runs off them: the 8-token tiles 3% faster in
// cache and 7-16% on weights streamed from memory.
enum class T5Decode { kAverage, kCompare };

// This CPU's: kCompare on AMD family 1Ah (Zen 5) and later, else kAverage; or what
// set_t5_decode chose.
T5Decode t5_decode();
// For tests: run the tiles with either decoder.
void set_t5_decode(T5Decode d);

}  // namespace bitnet::cpu::avx512vnni
