// A step's attention as work items for the threads, with long contexts split over positions
// (as flash-decoding): one decode token of 2B-4T is 5 kv groups, too few items to keep the
// threads equally busy, and each group's cache at 4096 positions is 2 MB that one thread
// would read alone. A token attending to more than kAttentionPartPositions positions is cut
// into parts of that many (the last shorter); each part's heads run attention_heads_part into
// scratch, and the last part of a (token, heads) pair to finish merges them
// (combine_attention_parts). The cut depends on the token's positions only, never on the
// thread count or the other tokens of the step, so a sequence's logits are the same alone or
// in a batch, on any number of threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace bitnet::cpu {

inline constexpr int64_t kAttentionPartPositions = 512;

// The parts of a token attending to n_pos positions: 1 unless split and n_pos passes
// kAttentionPartPositions.
inline int64_t attention_parts(int64_t n_pos, bool split) {
  return split && n_pos > kAttentionPartPositions ? (n_pos + kAttentionPartPositions - 1) / kAttentionPartPositions : 1;
}

// Merges n_parts parts of one attention of n_q heads (attention_heads_part's outputs: part c's
// rows at outs + c * n_q * head_dim, its maxima and sums at maxes + c * n_q, sums + c * n_q)
// into out (n_q rows of head_dim): out = sum_c w_c o_c / sum_c w_c l_c, w_c = exp(m_c - m), m
// the largest m_c, the weights and their sum in double.
void combine_attention_parts(int64_t n_parts, int32_t n_q, int32_t head_dim, const float* outs, const float* maxes,
                             const double* sums, float* out);

class AttentionSplit {
 public:
  struct Item {
    int64_t token = 0;
    int64_t head_item = 0;  // heads [head_item * heads, ...) of the token
    int64_t part = 0;       // 0 .. n_parts - 1
    int64_t n_parts = 1;    // 1: the whole attention in one call
    int64_t j_begin = 0;    // the part's positions [j_begin, j_end)
    int64_t j_end = 0;
  };

  // The items of a step: token t attends to positions [0, pos[t] + 1), in head_items items of
  // `heads` query heads (head_dim each); split: whether long contexts are cut into parts.
  // Reuses its buffers: no allocation once they have grown to a step's size.
  void plan(std::span<const int32_t> pos, int64_t head_items, int32_t heads, int32_t head_dim, bool split);
  int64_t n_items() const { return item_start_.empty() ? 0 : item_start_.back(); }
  Item item(int64_t i) const;

  // Item i's scratch (an item of several parts): heads rows of head_dim, heads maxima and sums.
  float* part_out(const Item& it) { return part_out_.data() + slot(it) * heads_ * head_dim_; }
  float* part_max(const Item& it) { return part_max_.data() + slot(it) * heads_; }
  double* part_sum(const Item& it) { return part_sum_.data() + slot(it) * heads_; }
  // Marks item it's part written; true for the last of its (token, head item) to finish, whose
  // thread then merges them (combine). The writes of the other parts are visible to it.
  bool finish_part(const Item& it);
  void combine(const Item& it, float* out) const;

 private:
  int64_t slot(const Item& it) const { return part_base_[static_cast<size_t>(it.token)] + it.head_item * it.n_parts + it.part; }

  int32_t heads_ = 1;
  int32_t head_dim_ = 0;
  std::vector<int64_t> item_start_;  // [n_tokens + 1]: token t's first item
  std::vector<int64_t> n_pos_;       // [n_tokens]: positions token t attends to
  std::vector<int64_t> n_parts_;     // [n_tokens]
  std::vector<int64_t> part_base_;   // [n_tokens]: token t's first part slot
  std::vector<int64_t> pair_base_;   // [n_tokens]: token t's first (token, head item) counter
  std::vector<float> part_out_;
  std::vector<float> part_max_;
  std::vector<double> part_sum_;
  std::unique_ptr<std::atomic<int32_t>[]> pending_;  // per split (token, head item): parts left
  size_t pending_size_ = 0;
};

}  // namespace bitnet::cpu
