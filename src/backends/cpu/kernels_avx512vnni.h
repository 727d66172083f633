// AVX-512 VNNI set: the choices it makes by microarchitecture (kernels_avx512vnni_choices.cpp).
#pragma once

#include "backends/cpu/weights.h"
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

// The ternary layout for a backend of n_threads on CPU f. T5 (1.6 bits per weight) decodes a
// position with two vpdpbusd per 64 weights, the 2-bit layout with one: on Zen 4 (AMD family
// 19h), which runs a 512-bit vpdpbusd as two 256-bit halves, one core decodes T5 at 19-20 GB/s
// while it reads 26-33 GB/s, so a lone thread decodes 2B-4T 15-35% faster in the 2-bit layout;
// from two threads on (sharing the bandwidth), and on Zen 5 at every count, T5 is faster
// (docs/performance.md). k5Trit everywhere else.
TernaryLayout ternary_layout_for(const CpuFeatures& f, int n_threads);
// ternary_layout_for this CPU (KernelSet::ternary_layout_for_threads).
TernaryLayout ternary_layout_for_threads(int n_threads);

// How far ahead T5 decode (one token) prefetches its codes. 8 KB; 4 KB on AMD family 19h
// (Zen 4), where 2B-4T decode took 0.96-0.99 of 8 KB's time, token by token in one process,
// and every 2B-4T shape streamed on two threads 2-5% faster. On Zen 5, 4 KB took 1.00-1.06 of
// 8 KB's (docs/performance.md).
int64_t t5_decode_prefetch_bytes_for(const CpuFeatures& f);
// This CPU's t5_decode_prefetch_bytes_for, found once.
int64_t t5_decode_prefetch_bytes();

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
