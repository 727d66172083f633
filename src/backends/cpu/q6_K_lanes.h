// Q6_K weights in sub-block-lane order, the order the AVX-512 VNNI set's Q6_K kernels read
// (KernelSet::q6_K_lanes_dot). A block keeps ggml's size and its scales and d where ggml has
// them (bytes 192-207, 208-209); its 256 codes move in two ways.
// - Places: the code at position 64i + 4p + k (i < 4, p < 16, k < 4) is element 16p + 4i + k.
//   Unpacked as 4 vectors of 64 positions, lane p of every vector then holds 4 codes of
//   sub-block p, so one accumulator per block takes all 4 vpdpbusd and one vpmulld applies
//   the 16 scales.
// - Bytes: three planes of 64 bytes replace ggml's ql and qh. Byte x of plane j (j < 3) holds
//   the code at position 64j + x in bits 0-5 and bits 2j, 2j+1 of the code at position 192 + x
//   in bits 6-7. Unpacking takes 9 byte operations per block (a mask per plane, then the
//   fourth vector's three bit pairs shifted and selected into place) where ggml's nibbles and
//   bit pairs take 20.
// The Q8_K activations go in the same places (q8_K_block_to_lanes), their d and bsums unchanged.
#pragma once

#include <cstdint>

namespace bitnet::cpu {

// The element at position pos (0..255) of a block in lane order.
inline constexpr int q6_K_lane_element(int pos) { return 16 * (pos % 64 / 4) + 4 * (pos / 64) + pos % 4; }

// One 210-byte Q6_K block from the file's order into lane order (src and dst do not overlap).
void q6_K_block_to_lanes(const uint8_t* src, uint8_t* dst);
// n_blocks of them, with AVX-512 where the CPU has it (F and BW), else block by block above;
// the same bytes either way.
void q6_K_blocks_to_lanes(const uint8_t* src, uint8_t* dst, int64_t n_blocks);
#if defined(__x86_64__)
// The AVX-512 version (q6_K_lanes_avx512.cpp): only where the CPU has AVX-512 F and BW.
void q6_K_blocks_to_lanes_avx512(const uint8_t* src, uint8_t* dst, int64_t n_blocks);
#endif
// One 292-byte Q8_K block's 256 quants into lane order, in place.
void q8_K_block_to_lanes(uint8_t* block);
// n_cols values of a row of lane-order Q6_K blocks, in element order.
void dequantize_q6_K_lanes_row(const uint8_t* row, int64_t n_cols, float* dst);

}  // namespace bitnet::cpu
