// One request's sampling and text: sampled tokens, streamed as text deltas that never split a
// UTF-8 character or show a part of a stop string. The Scheduler evaluates its tokens.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/model.h"
#include "bitnet/status.h"
#include "model/sampler.h"
#include "server/request.h"

namespace bitnet::server {

struct GenerationResult {
  std::string text;                 // everything generated (stop string excluded)
  std::string finish_reason;        // "stop" | "length" | "cancelled"
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;        // prompt tokens found in the KV cache (not evaluated)
  int64_t completion_tokens = 0;
  double prompt_seconds = 0.0;
  double generation_seconds = 0.0;
};

// The sampling and text side of one request, apart from how its tokens are evaluated
// (batched with others by the Scheduler): fed the logits after each evaluated token, it
// samples, streams the text and says which token to evaluate next.
class Generation {
 public:
  Generation(const Model& model, const GenerationRequest& request, std::span<const int32_t> prompt, int64_t max_tokens,
             int64_t max_len, std::function<bool(std::string_view)> on_text);
  // The logits after the last evaluated token (a step's output: the whole row, or the part of
  // it that wants() asked for): the next token to evaluate, or nothing when the generation
  // has finished (result().finish_reason says why).
  std::optional<int32_t> next(const Model::StepOutput& out);
  // The part of the next logits row the sampler needs (Model::StepInput::top and also; valid
  // until the next call of next()), or none when it needs the whole row.
  const std::optional<hal::TopRequest>& wants();
  void cancel();  // finishes as "cancelled" (nothing more is streamed)
  bool finished() const { return finished_; }
  GenerationResult& result() { return r_; }

 private:
  void flush(bool final);
  void finish(const char* reason);

  const Model& model_;
  const GenerationRequest& request_;
  int64_t max_tokens_;
  int64_t max_len_;  // sequence length at which the context is full
  std::function<bool(std::string_view)> on_text_;
  std::vector<int32_t> history_;
  Sampler sampler_;
  std::optional<hal::TopRequest> wants_;
  GenerationResult r_;
  size_t sent_ = 0;
  bool finished_ = false;
  bool client_gone_ = false;
};

// Text held back from streaming: the longest tail of `pending` that is an unfinished UTF-8
// character or the start of a stop string. Exposed for tests.
size_t held_back(std::string_view pending, std::span<const std::string> stop);

}  // namespace bitnet::server
