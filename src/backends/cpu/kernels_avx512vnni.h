// AVX-512 VNNI set: the choices it makes by microarchitecture (kernels_avx512vnni.cpp,
// kernels_avx512vnni_qdot.cpp).
#pragma once

#include "core/cpu_features.h"

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

// Where the Q6_K row dot and tile prefetch the blocks they stream (kRowPrefetchBytes ahead).
// kL1 (prefetcht0) keeps Zen 5's head at 88-105% of the bandwidth bound. On one Zen 4 core the
// L1 prefetches gain nothing over none (the Q6_K row dot at 18-19 GB/s from memory either way,
// against 25-27 in L2), while prefetcht1 lets it read 21-22 GB/s: 2B-4T decode with a Q6_K
// head 5% faster on one thread (docs/performance.md).
enum class RowPrefetch { kL1, kL2 };

// kL2 on AMD family 19h (Zen 4; Zen 3 has no AVX-512), else kL1.
RowPrefetch row_prefetch_for(const CpuFeatures& f);
// This CPU's row_prefetch_for, or what set_row_prefetch chose.
RowPrefetch row_prefetch();
// For tests: run the Q6_K kernels with either.
void set_row_prefetch(RowPrefetch p);

}  // namespace bitnet::cpu::avx512vnni
