// Token sampling: repetition penalty, then top-k, top-p and min-p on the untempered
// distribution, then temperature and a seeded draw (llama.cpp's default chain order).
// Temperature <= 0 is greedy: the highest logit after penalties, lowest id on ties.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "bitnet/sampling.h"
#include "hal/top.h"

namespace bitnet {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `history`: the tokens so far (prompt and generated), for the repetition penalty.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  // The part of the logits row that sample_top() needs to draw what sample() would, with the
  // same state: the top_k + P largest logits and the P penalized ids' logits (P = the distinct
  // ids of the penalty's window; a penalty lowers or raises only those, so the top_k after it
  // lie among them). Greedy takes top_k = 1. None when the whole row is needed (top-k off
  // while sampling).
  std::optional<hal::TopRequest> wants(std::span<const int32_t> history) const;
  // sample() from a row's select_top(wants(history)) (the top entries in any order): the same
  // token, and the generator advanced alike.
  int32_t sample_top(std::span<const hal::TokenLogit> part, std::span<const int32_t> history);

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> cand_;

  bool penalizes() const { return params_.repeat_penalty != 1.0f && params_.repeat_last_n != 0; }
  std::vector<int32_t> penalized(std::span<const int32_t> history) const;
  float penalize(float logit) const;
  int32_t draw();  // top-k (cand_ holds more than top_k), top-p, min-p, temperature, the draw
};

}  // namespace bitnet
