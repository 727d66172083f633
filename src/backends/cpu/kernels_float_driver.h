// The loops around the float-weight matmul tiles, shared by the AVX2 and NEON sets. Tiles is a
// struct with Tiles::tile<R, T>(w, x, t, r, y): rows r .. r+R-1 against tokens t .. t+T-1.
//
// Internal linkage (anonymous namespace): each ISA file that includes it gets its own copy,
// compiled with that file's flags; a shared template instance could be the copy built for an
// ISA the CPU lacks (CMakeLists.txt).
#pragma once

#include <cstdint>

#include "backends/cpu/kernels.h"

namespace bitnet::cpu {

namespace {

// Tiles of R rows over rows [r0, r1), the last r1 - r0 % R rows one at a time.
template <class Tiles, int R, int T>
void tile_rows(const CpuWeight& w, const float* x, int64_t t, float* y, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + R <= r1; r += R) Tiles::template tile<R, T>(w, x, t, r, y);
  for (; r < r1; ++r) Tiles::template tile<1, T>(w, x, t, r, y);
}

// Decode streams 8 rows at once; prefill takes tiles of 4 rows x 2 tokens.
template <class Tiles>
void matmul_tiles(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  int64_t t = 0;
  for (; t + 2 <= n_tokens; t += 2) tile_rows<Tiles, 4, 2>(w, x, t, y, r0, r1);
  if (t < n_tokens) tile_rows<Tiles, 8, 1>(w, x, t, y, r0, r1);
}

}  // namespace

}  // namespace bitnet::cpu
