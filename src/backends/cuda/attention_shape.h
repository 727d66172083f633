// The shape and split of the split-K attention kernel (attention.cu), plain C++ so that the
// host chooses and tests it.
#pragma once

#include <cstdint>

namespace bitnet::cuda {

struct AttentionShape {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;  // divides n_head (GQA)
  int32_t head_dim = 0;   // 1 .. kMaxAttentionHeadDim (fastest: 64, 128, 256)
  int64_t n_embd_kv = 0;  // n_head_kv * head_dim: a cache row
  float kq_scale = 1.0f;
  int32_t n_splits = 1;   // split-K: positions in n_splits slices of split_len (fixed per graph)
  int32_t split_len = 0;
};

// The largest head the attention kernel takes (a warp's lanes hold 8 dimensions each).
inline constexpr int32_t kMaxAttentionHeadDim = 256;
inline bool attention_head_dim_supported(int32_t head_dim) { return head_dim >= 1 && head_dim <= kMaxAttentionHeadDim; }

// Scratch floats per (token, head, slice): m, l and head_dim accumulators.
inline int64_t attention_slot_floats(int32_t head_dim) { return 2 + int64_t{head_dim}; }

// Scratch floats the split-K attention needs for n_tokens tokens.
inline int64_t attention_scratch_floats(const AttentionShape& s, int64_t n_tokens) {
  return n_tokens * s.n_head * s.n_splits * attention_slot_floats(s.head_dim);
}

// The split for n_tokens tokens over a cache of n_ctx positions on a device of n_sm
// multiprocessors: enough (token, head, slice) blocks for two per multiprocessor, no slice under
// 128 positions (a prompt chunk's tokens fill the device alone: one slice, and scratch for one).
// It depends on n_ctx and n_tokens, not on the positions, so one captured decode step serves
// every position.
inline void choose_attention_split(AttentionShape& s, int64_t n_ctx, int32_t n_sm, int64_t n_tokens = 1) {
  constexpr int64_t kMinSlice = 128;
  const int64_t rows = (s.n_head > 0 ? s.n_head : 1) * (n_tokens > 0 ? n_tokens : 1);
  const int64_t want = (2 * int64_t{n_sm} + rows - 1) / rows;
  const int64_t most = (n_ctx + kMinSlice - 1) / kMinSlice;
  int64_t n = want < most ? want : most;
  if (n < 1) n = 1;
  s.n_splits = static_cast<int32_t>(n);
  s.split_len = static_cast<int32_t>((n_ctx + n - 1) / n);
}

}  // namespace bitnet::cuda
