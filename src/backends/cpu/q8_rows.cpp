#include "backends/cpu/kernel_set.h"

namespace bitnet::cpu {

void Q8Buffer::resize(int64_t n_tokens, int64_t n_cols) {
  n_tokens_ = n_tokens;
  n_cols_ = n_cols;
  token_stride_ = (n_tokens + kTokenPad - 1) / kTokenPad * kTokenPad;
  const int64_t n_groups = (n_cols + kGroupCols - 1) / kGroupCols;
  // Capacity is kept: after the first step of a shape this allocates nothing.
  q_.resize(static_cast<size_t>(n_tokens * n_cols));
  scale_.assign(static_cast<size_t>(token_stride_), 1.0f);
  group_sum_.assign(static_cast<size_t>(n_groups * token_stride_), 0);
}

void Q8Buffer::quantize(const KernelSet& kernels, int64_t t, const float* x) {
  scale_[static_cast<size_t>(t)] =
      kernels.quantize_act(x, n_cols_, q_.data() + t * n_cols_, group_sum_.data() + t, token_stride_);
}

Q8Rows Q8Buffer::rows() const {
  return {q_.data(), scale_.data(), group_sum_.data(), n_tokens_, n_cols_, token_stride_};
}

}  // namespace bitnet::cpu
