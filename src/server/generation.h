// One request's generation on an Engine: the prompt (after the part already in the KV cache),
// then sampled tokens, streamed as text deltas that never split a UTF-8 character or show a
// part of a stop string. Checks `cancel` before every forward step (prefill chunks included),
// so a vanished client costs at most one step.
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/engine.h"
#include "bitnet/status.h"
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

// Prompt tokens are evaluated in chunks of this many, with a cancel check between them.
inline constexpr int64_t kPrefillChunk = 128;

// Runs `request` (its prompt already tokenized) to the end, calling on_text with each delta;
// on_text returning false cancels like `cancel`.
Result<GenerationResult> generate(Engine& engine, std::span<const int32_t> prompt, const GenerationRequest& request,
                                  int64_t max_tokens, const std::atomic<bool>& cancel,
                                  const std::function<bool(std::string_view)>& on_text);

// Text held back from streaming: the longest tail of `pending` that is an unfinished UTF-8
// character or the start of a stop string. Exposed for tests.
size_t held_back(std::string_view pending, std::span<const std::string> stop);

}  // namespace bitnet::server
