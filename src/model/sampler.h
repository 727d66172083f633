// Token sampling: repetition penalty, then top-k, top-p and min-p on the untempered
// distribution, then temperature and a seeded draw (llama.cpp's default chain order).
// Temperature <= 0 is greedy: the highest logit after penalties, lowest id on ties.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "bitnet/sampling.h"

namespace bitnet {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `history`: the tokens so far (prompt and generated), for the repetition penalty.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> cand_;
};

}  // namespace bitnet
