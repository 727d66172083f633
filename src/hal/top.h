// Part of a logits row instead of all of it: the k largest logits with their ids, then the
// logits of a few named ids. It is what a sampler with top-k needs (model/sampler.h), and a GPU
// backend selects it on the device instead of copying a 128K-vocabulary row back per token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bitnet/sampling.h"
#include "bitnet/status.h"
#include "hal/ops.h"

namespace bitnet::hal {

using TokenLogit = bitnet::TokenLogit;

// What one logits row gives back: its `k` largest logits (ties at the k-th value go to the
// lower ids; k larger than the row takes all of it), then the logit of each id of `also`
// (ids outside the row are skipped), in that order.
struct TopRequest {
  int32_t k = 0;
  std::vector<int32_t> also;
};

// Whether a ranks before b: the larger logit, then the lower id; a NaN after every number.
inline bool ranks_before(const TokenLogit& a, const TokenLogit& b) {
  const bool a_nan = a.logit != a.logit, b_nan = b.logit != b.logit;
  if (a_nan || b_nan) return a_nan == b_nan ? a.id < b.id : b_nan;
  return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
}

// The selection on the host, and the reference of the device kernels: out = the top entries
// (ordered by ranks_before), then the `also` entries.
void select_top(std::span<const float> row, const TopRequest& req, std::vector<TokenLogit>& out);

// The logits activation of a graph run by compute_top with n_requests requests (one per row),
// or kInvalidArgument.
Result<const ActDesc*> top_logits(const Graph& graph, size_t n_requests);

// The top entries' count for a row of n_cols: min(k, n_cols).
inline int64_t top_count(const TopRequest& req, int64_t n_cols) { return req.k < n_cols ? req.k : n_cols; }

// A device kernel's arguments for the requests of one step's rows (n_cols each), as one array
// of int32 words to upload: per row r, k[r] = top_count(req[r], n_cols), the start of its
// entries out_begin[r] (k[r] top entries, then its `also` ids that lie in the row), and the
// start of those ids in also[] (also_begin[r]); out_begin and also_begin have n_rows + 1 words.
struct TopPlan {
  std::vector<int32_t> words;  // k, out_begin, also_begin, also
  int64_t n_rows = 0;
  int64_t n_out = 0;  // entries of all rows
  const int32_t* k() const { return words.data(); }
  const int32_t* out_begin() const { return words.data() + n_rows; }
  const int32_t* also_begin() const { return words.data() + 2 * n_rows + 1; }
  const int32_t* also() const { return words.data() + 3 * n_rows + 2; }
  static int64_t also_offset(int64_t n_rows) { return 3 * n_rows + 2; }  // in words
};

// False when the entries outnumber int32 offsets.
bool plan_top(std::span<const TopRequest> req, int64_t n_cols, TopPlan& plan);

// The rows of a kernel's output for `plan`: entries as (int32 id, float logit bits) word pairs
// (TokenLogit's layout), plan.n_out of them; out gets one vector per row.
void unpack_top(const TopPlan& plan, const void* entries, std::vector<std::vector<TokenLogit>>& out);

}  // namespace bitnet::hal
