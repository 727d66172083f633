#include "backends/cpu/attention_split.h"

#include <algorithm>
#include <cmath>

namespace bitnet::cpu {

void combine_attention_parts(int64_t n_parts, int32_t n_q, int32_t head_dim, const float* outs, const float* maxes,
                             const double* sums, float* out) {
  for (int32_t h = 0; h < n_q; ++h) {
    float m = -INFINITY;
    for (int64_t c = 0; c < n_parts; ++c) m = std::max(m, maxes[c * n_q + h]);
    double total = 0.0;
    for (int64_t c = 0; c < n_parts; ++c) total += std::exp(static_cast<double>(maxes[c * n_q + h]) - m) * sums[c * n_q + h];
    float* o = out + int64_t{h} * head_dim;
    for (int32_t d = 0; d < head_dim; ++d) o[d] = 0.0f;
    for (int64_t c = 0; c < n_parts; ++c) {
      const auto w = static_cast<float>(std::exp(static_cast<double>(maxes[c * n_q + h]) - m) / total);
      const float* oc = outs + (c * n_q + h) * head_dim;
      for (int32_t d = 0; d < head_dim; ++d) o[d] += w * oc[d];
    }
  }
}

void AttentionSplit::plan(std::span<const int32_t> pos, int64_t head_items, int32_t heads, int32_t head_dim, bool split) {
  heads_ = heads;
  head_dim_ = head_dim;
  const size_t n = pos.size();
  item_start_.resize(n + 1);
  n_parts_.resize(n);
  n_pos_.resize(n);
  part_base_.resize(n);
  pair_base_.resize(n);
  int64_t items = 0, parts = 0, pairs = 0;
  for (size_t t = 0; t < n; ++t) {
    const int64_t n_pos = int64_t{pos[t]} + 1;
    const int64_t p = attention_parts(n_pos, split);
    item_start_[t] = items;
    n_pos_[t] = n_pos;
    n_parts_[t] = p;
    part_base_[t] = parts;
    pair_base_[t] = pairs;
    items += head_items * p;
    if (p > 1) {
      parts += head_items * p;
      pairs += head_items;
    }
  }
  item_start_[n] = items;
  const auto grow = [](auto& v, size_t size) {
    if (v.size() < size) v.resize(size);
  };
  grow(part_out_, static_cast<size_t>(parts * heads * head_dim));
  grow(part_max_, static_cast<size_t>(parts * heads));
  grow(part_sum_, static_cast<size_t>(parts * heads));
  if (pending_size_ < static_cast<size_t>(pairs)) {
    pending_ = std::make_unique<std::atomic<int32_t>[]>(static_cast<size_t>(pairs));
    pending_size_ = static_cast<size_t>(pairs);
  }
  for (size_t t = 0; t < n; ++t) {
    if (n_parts_[t] == 1) continue;
    for (int64_t hi = 0; hi < head_items; ++hi) {
      pending_[static_cast<size_t>(pair_base_[t] + hi)].store(static_cast<int32_t>(n_parts_[t]), std::memory_order_relaxed);
    }
  }
}

AttentionSplit::Item AttentionSplit::item(int64_t i) const {
  const auto it = std::upper_bound(item_start_.begin(), item_start_.end(), i);
  const auto t = static_cast<size_t>(it - item_start_.begin() - 1);
  const int64_t local = i - item_start_[t];
  Item r;
  r.token = static_cast<int64_t>(t);
  r.n_parts = n_parts_[t];
  r.head_item = local / r.n_parts;
  r.part = local % r.n_parts;
  const int64_t part_size = r.n_parts == 1 ? n_pos_[t] : kAttentionPartPositions;
  r.j_begin = r.part * part_size;
  r.j_end = std::min(r.j_begin + part_size, n_pos_[t]);
  return r;
}

bool AttentionSplit::finish_part(const Item& it) {
  std::atomic<int32_t>& left = pending_[static_cast<size_t>(pair_base_[static_cast<size_t>(it.token)] + it.head_item)];
  return left.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

void AttentionSplit::combine(const Item& it, float* out) const {
  const int64_t first = part_base_[static_cast<size_t>(it.token)] + it.head_item * it.n_parts;
  combine_attention_parts(it.n_parts, heads_, head_dim_, part_out_.data() + first * heads_ * head_dim_,
                          part_max_.data() + first * heads_, part_sum_.data() + first * heads_, out);
}

}  // namespace bitnet::cpu
