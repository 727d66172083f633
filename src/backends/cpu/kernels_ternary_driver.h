// The loops around the W2A8 (ternary) matmul kernels, shared by the x86 and Arm sets: decode
// over row groups, and prefill over cache blocks of rows and tiles of tokens. Each set supplies
// only its inner kernel, as a struct K:
//   K::kRows                  rows per row group of the layout (weights.h)
//   K::kBlockCodeBytes        codes per cache block of rows (prefill)
//   K::row_group(w, sh, x, t, rg, out)     decode: out[i] = row rg * kRows + i for token t
//   K::tile<T>(w, sh, x, t0, ra, rb, y)    prefill: rows [ra, rb) against tokens t0 .. t0+T-1
//
// Everything here has internal linkage (anonymous namespace): each ISA file that includes it
// gets its own copy, compiled with that file's flags. A shared (inline or template) definition
// would leave the linker one copy, possibly the one built for an ISA the CPU lacks
// (CMakeLists.txt). For the same reason no std:: templates are called here.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels.h"
#include "core/check.h"

namespace bitnet::cpu {

namespace {

constexpr int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
constexpr int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Tokens per prefill tile in every set: one 8-lane vector (or two 4-lane ones) of outputs.
constexpr int kTileTokens = 8;

// The shape of a repacked ternary weight, in groups and blocks.
struct TernaryShape {
  int64_t n_groups;      // 128-column groups per row
  int64_t block_groups;  // groups per scale block
  int64_t n_blocks;      // scale blocks per row
  explicit TernaryShape(const CpuWeight& w)
      : n_groups(w.n_cols / kGroupCols),
        block_groups(w.ternary.scale_block / kGroupCols),
        n_blocks(n_groups / block_groups) {}
};

// Decode (one token): rows [r0, r1), a row group at a time.
template <class K>
void ternary_gemv(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  const TernaryShape sh(w);
  for (int64_t rg = r0 / K::kRows; rg * K::kRows < r1; ++rg) {
    alignas(16) float out[K::kRows];
    K::row_group(w, sh, x, 0, rg, out);
    // A range may start or end inside a row group: keep only its rows.
    for (int64_t r = max64(r0, rg * K::kRows); r < min64(r1, (rg + 1) * K::kRows); ++r) y[r] = out[r % K::kRows];
  }
}

// Prefill over rows [r0, r1) in cache blocks of row groups: every token tile passes over a
// block while its codes are in L2, so the weights come from memory once per matmul. Block ends
// fall on row group boundaries (only r0 and r1 may cut a row group).
template <class K>
void ternary_gemm(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  using Tile = void (*)(const CpuWeight&, const TernaryShape&, const Q8Rows&, int64_t, int64_t, int64_t, float*);
  static constexpr Tile kTiles[kTileTokens + 1] = {nullptr,
                                                   K::template tile<1>, K::template tile<2>, K::template tile<3>,
                                                   K::template tile<4>, K::template tile<5>, K::template tile<6>,
                                                   K::template tile<7>, K::template tile<8>};
  const TernaryShape sh(w);
  const int64_t group_bytes = sh.n_groups * K::kRows * kGroupBytes;  // codes of one row group
  const int64_t block_rows = K::kRows * max64(1, K::kBlockCodeBytes / group_bytes);
  for (int64_t rb = r0; rb < r1;) {
    const int64_t rb_end = min64(r1, rb / K::kRows * K::kRows + block_rows);
    for (int64_t t0 = 0; t0 < x.n_tokens; t0 += kTileTokens) {
      kTiles[min64(kTileTokens, x.n_tokens - t0)](w, sh, x, t0, rb, rb_end, y);
    }
    rb = rb_end;
  }
}

template <class K>
void ternary_matmul(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  BITNET_CHECK(w.ternary.rows_per_group == K::kRows);
  if (x.n_tokens == 1) return ternary_gemv<K>(w, x, y, r0, r1);
  ternary_gemm<K>(w, x, y, r0, r1);
}

}  // namespace

}  // namespace bitnet::cpu
