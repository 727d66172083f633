#include "hal/top.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include <fmt/format.h>

#include "hal/backend.h"

namespace bitnet::hal {

namespace {
constexpr int64_t kSkipBlock = 64;
}  // namespace

void select_top(std::span<const float> row, const TopRequest& req, std::vector<TokenLogit>& out) {
  const auto n = static_cast<int64_t>(row.size());
  const auto k = static_cast<size_t>(std::max<int64_t>(0, top_count(req, n)));
  out.clear();
  out.reserve(k + req.also.size());
  if (k > 0) {
    // A bounded heap of the best k so far, its worst entry at the front: one pass over the
    // row, no copy of it (a 128K row, k = 40).
    const auto worse = [](const TokenLogit& a, const TokenLogit& b) { return ranks_before(a, b); };
    const float* x = row.data();
    for (int64_t i = 0; i < n;) {
      // Once the heap is full, a block whose logits are all <= its worst entry's is skipped
      // in one vectorised pass: a later id with an equal logit ranks after it, and a NaN
      // ranks after everything (while the worst entry is a NaN, every block is looked at).
      // Most of a 128K row is skipped so; the per-entry test below took ~1 ms of a decode
      // step of 8 sequences.
      const int64_t end = std::min(n, i + kSkipBlock);
      if (out.size() == k && out.front().logit == out.front().logit && end - i == kSkipBlock) {
        const float worst = out.front().logit;
        bool any = false;
        for (int64_t j = i; j < end; ++j) any |= x[j] > worst;
        if (!any) {
          i = end;
          continue;
        }
      }
      for (; i < end; ++i) {
        const TokenLogit c{static_cast<int32_t>(i), x[i]};
        if (out.size() < k) {
          out.push_back(c);
          std::push_heap(out.begin(), out.end(), worse);
        } else if (ranks_before(c, out.front())) {
          std::pop_heap(out.begin(), out.end(), worse);
          out.back() = c;
          std::push_heap(out.begin(), out.end(), worse);
        }
      }
    }
    std::sort(out.begin(), out.end(), ranks_before);
  }
  for (int32_t id : req.also) {
    if (id >= 0 && id < n) out.push_back({id, row[static_cast<size_t>(id)]});
  }
}

bool plan_top(std::span<const TopRequest> req, int64_t n_cols, TopPlan& plan) {
  const auto n_rows = static_cast<int64_t>(req.size());
  plan.n_rows = n_rows;
  plan.words.assign(static_cast<size_t>(3 * n_rows + 2), 0);
  std::vector<int32_t> also;
  int64_t out = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    const TopRequest& q = req[static_cast<size_t>(r)];
    const int64_t k = std::max<int64_t>(0, top_count(q, n_cols));
    plan.words[static_cast<size_t>(r)] = static_cast<int32_t>(k);
    plan.words[static_cast<size_t>(n_rows + r)] = static_cast<int32_t>(out);
    plan.words[static_cast<size_t>(2 * n_rows + 1 + r)] = static_cast<int32_t>(also.size());
    const size_t before = also.size();
    for (int32_t id : q.also) {
      if (id >= 0 && id < n_cols) also.push_back(id);
    }
    out += k + static_cast<int64_t>(also.size() - before);
    if (out > INT32_MAX) return false;
  }
  plan.words[static_cast<size_t>(2 * n_rows)] = static_cast<int32_t>(out);
  plan.words[static_cast<size_t>(3 * n_rows + 1)] = static_cast<int32_t>(also.size());
  plan.words.insert(plan.words.end(), also.begin(), also.end());
  plan.n_out = out;
  return true;
}

void unpack_top(const TopPlan& plan, const void* entries, std::vector<std::vector<TokenLogit>>& out) {
  static_assert(sizeof(TokenLogit) == 8);
  const auto* bytes = static_cast<const uint8_t*>(entries);
  out.resize(static_cast<size_t>(plan.n_rows));
  for (int64_t r = 0; r < plan.n_rows; ++r) {
    std::vector<TokenLogit>& row = out[static_cast<size_t>(r)];
    row.resize(static_cast<size_t>(plan.out_begin()[r + 1] - plan.out_begin()[r]));
    std::memcpy(row.data(), bytes + static_cast<size_t>(plan.out_begin()[r]) * sizeof(TokenLogit), row.size() * sizeof(TokenLogit));
  }
}

Result<const ActDesc*> top_logits(const Graph& graph, size_t n_requests) {
  if (graph.logits < 0 || static_cast<size_t>(graph.logits) >= graph.acts.size()) return invalid_argument("a graph without logits");
  const ActDesc& a = graph.acts[static_cast<size_t>(graph.logits)];
  if (static_cast<int64_t>(n_requests) != a.n_rows) {
    return invalid_argument(fmt::format("{} top requests for {} logits rows", n_requests, a.n_rows));
  }
  return &a;
}

Status Backend::compute_then_select(const Graph& graph, std::span<const int32_t> tokens, std::span<const TopRequest> req,
                                    std::vector<std::vector<TokenLogit>>& out) {
  BITNET_ASSIGN_OR_RETURN(const ActDesc* a, top_logits(graph, req.size()));
  std::vector<float> logits(static_cast<size_t>(a->n_rows * a->n_cols));
  BITNET_RETURN_IF_ERROR(compute(graph, tokens, logits));
  out.resize(req.size());
  const auto n_cols = static_cast<size_t>(a->n_cols);
  for (size_t r = 0; r < req.size(); ++r) select_top(std::span<const float>(logits).subspan(r * n_cols, n_cols), req[r], out[r]);
  return {};
}

}  // namespace bitnet::hal
