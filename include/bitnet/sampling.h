// Sampling parameters (llama.cpp's names and defaults where they have one).
#pragma once

#include <cstdint>

namespace bitnet {

struct SamplingParams {
  float temperature = 0.8f;    // <= 0: greedy (argmax)
  int32_t top_k = 40;          // <= 0: off
  float top_p = 0.95f;         // >= 1: off
  float min_p = 0.05f;         // <= 0: off
  float repeat_penalty = 1.0f; // 1: off
  int32_t repeat_last_n = 64;  // tokens the penalty looks back over
  uint64_t seed = 0;           // same seed, same output
};

// A token id and its logit: one entry of part of a logits row (Model::StepInput::top).
struct TokenLogit {
  int32_t id = 0;
  float logit = 0.0f;
};

}  // namespace bitnet
