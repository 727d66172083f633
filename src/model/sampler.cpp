#include "model/sampler.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <unordered_set>

namespace bitnet {

namespace {

// Whether a ranks before b: the larger logit, then the lower id, a NaN after every number
// (hal::ranks_before: the order the backends' top-k selection uses).
template <class Candidate>
bool ranks_first(const Candidate& a, const Candidate& b) {
  return hal::ranks_before({a.id, a.logit}, {b.id, b.logit});
}

// Sorts by rank and fills p with the softmax of logit / temperature.
template <class Candidate>
void softmax_sorted(std::vector<Candidate>& c, float temperature) {
  std::sort(c.begin(), c.end(), ranks_first<Candidate>);
  const float max_logit = c.front().logit;
  double sum = 0.0;
  for (auto& x : c) {
    x.p = std::exp((x.logit - max_logit) / temperature);
    sum += x.p;
  }
  for (auto& x : c) x.p = static_cast<float>(x.p / sum);
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

// The distinct ids of the penalty's window (the last repeat_last_n tokens, all when < 0), or
// none when there is no penalty.
std::vector<int32_t> Sampler::penalized(std::span<const int32_t> history) const {
  if (!penalizes()) return {};
  const size_t n = params_.repeat_last_n < 0 ? history.size()
                                             : std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
  std::unordered_set<int32_t> seen(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
  std::vector<int32_t> ids(seen.begin(), seen.end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

float Sampler::penalize(float l) const { return l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty; }

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  if (params_.temperature <= 0.0f && !penalizes() && !logits.empty()) {
    // Greedy without a penalty: the first maximum of the logits themselves (as the candidate
    // path below picks it), without copying 128K candidates per token of every sequence.
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i) {
      if (hal::ranks_before({static_cast<int32_t>(i), logits[i]}, {static_cast<int32_t>(best), logits[best]})) best = i;
    }
    return static_cast<int32_t>(best);
  }
  cand_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cand_[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
  for (int32_t id : penalized(history)) {
    if (id < 0 || static_cast<size_t>(id) >= cand_.size()) continue;
    float& l = cand_[static_cast<size_t>(id)].logit;
    l = penalize(l);
  }
  return draw();
}

std::optional<hal::TopRequest> Sampler::wants(std::span<const int32_t> history) const {
  const bool greedy = params_.temperature <= 0.0f;
  if (!greedy && params_.top_k <= 0) return std::nullopt;
  hal::TopRequest req;
  req.also = penalized(history);
  const int64_t k = (greedy ? 1 : static_cast<int64_t>(params_.top_k)) + static_cast<int64_t>(req.also.size());
  req.k = static_cast<int32_t>(std::min<int64_t>(k, INT32_MAX));
  return req;
}

int32_t Sampler::sample_top(std::span<const hal::TokenLogit> part, std::span<const int32_t> history) {
  // The entries by id (an `also` id may be among the top ones too), then the penalty.
  cand_.clear();
  for (const hal::TokenLogit& t : part) cand_.push_back({t.id, t.logit, 0.0f});
  std::sort(cand_.begin(), cand_.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  cand_.erase(std::unique(cand_.begin(), cand_.end(), [](const Candidate& a, const Candidate& b) { return a.id == b.id; }),
              cand_.end());
  for (int32_t id : penalized(history)) {
    const auto it = std::lower_bound(cand_.begin(), cand_.end(), id, [](const Candidate& c, int32_t v) { return c.id < v; });
    if (it != cand_.end() && it->id == id) it->logit = penalize(it->logit);
  }
  if (cand_.empty()) return 0;
  return draw();
}

int32_t Sampler::draw() {
  if (params_.temperature <= 0.0f) {
    const auto best = std::min_element(cand_.begin(), cand_.end(), ranks_first<Candidate>);  // lowest id of the maxima
    return best->id;
  }

  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < cand_.size()) {
    std::partial_sort(cand_.begin(), cand_.begin() + params_.top_k, cand_.end(), ranks_first<Candidate>);
    cand_.resize(static_cast<size_t>(params_.top_k));
  }
  softmax_sorted(cand_, 1.0f);
  if (params_.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = cand_.size();
    for (size_t i = 0; i < cand_.size(); ++i) {
      cum += cand_[i].p;
      if (cum >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    cand_.resize(keep);
  }
  if (params_.min_p > 0.0f) {
    const float threshold = params_.min_p * cand_.front().p;
    size_t keep = 1;
    while (keep < cand_.size() && cand_[keep].p >= threshold) ++keep;
    cand_.resize(keep);
  }
  softmax_sorted(cand_, params_.temperature);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const double r = uniform(rng_);
  double cum = 0.0;
  for (const Candidate& c : cand_) {
    cum += c.p;
    if (r < cum) return c.id;
  }
  return cand_.back().id;
}

}  // namespace bitnet
