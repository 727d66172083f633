#include "server/generation.h"

#include <algorithm>
#include <chrono>


namespace bitnet::server {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Bytes at the end of s that begin a UTF-8 character not yet complete.
size_t incomplete_utf8_tail(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto c = static_cast<uint8_t>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

size_t held_back(std::string_view pending, std::span<const std::string> stop) {
  size_t hold = incomplete_utf8_tail(pending);
  for (const std::string& s : stop) {
    for (size_t n = std::min(s.size() - 1, pending.size()); n > hold; --n) {
      if (pending.substr(pending.size() - n) == std::string_view(s).substr(0, n)) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

Generation::Generation(const Engine& engine, const GenerationRequest& request, std::span<const int32_t> prompt,
                       int64_t max_tokens, int64_t max_len, std::function<bool(std::string_view)> on_text)
    : engine_(engine),
      request_(request),
      max_tokens_(max_tokens),
      max_len_(max_len),
      on_text_(std::move(on_text)),
      history_(prompt.begin(), prompt.end()),
      sampler_(request.sampling) {
  r_.prompt_tokens = static_cast<int64_t>(prompt.size());
  r_.finish_reason = "length";
}

void Generation::flush(bool final) {
  const size_t hold = final ? 0 : held_back(std::string_view(r_.text).substr(sent_), request_.stop);
  const size_t upto = r_.text.size() - hold;
  if (upto > sent_ && !client_gone_) {
    if (!on_text_(std::string_view(r_.text).substr(sent_, upto - sent_))) client_gone_ = true;
    sent_ = upto;
  }
}

void Generation::finish(const char* reason) {
  r_.finish_reason = reason;
  finished_ = true;
  if (r_.finish_reason != "cancelled") flush(true);
}

void Generation::cancel() {
  if (!finished_) finish("cancelled");
}

std::optional<int32_t> Generation::next(std::span<const float> logits) {
  if (finished_) return std::nullopt;
  if (client_gone_) {
    finish("cancelled");
    return std::nullopt;
  }
  if (r_.completion_tokens >= max_tokens_) {
    finish("length");
    return std::nullopt;
  }
  const int32_t id = sampler_.sample(logits, history_);
  if (engine_.is_end_of_generation(id)) {
    finish("stop");
    return std::nullopt;
  }
  history_.push_back(id);
  ++r_.completion_tokens;
  const size_t before = r_.text.size();
  r_.text += engine_.token_to_piece(id);
  // A stop string may end inside this piece: cut the text where it starts.
  bool hit = false;
  for (const std::string& s : request_.stop) {
    const size_t from = before >= s.size() ? before - s.size() + 1 : 0;
    const size_t at = r_.text.find(s, from);
    if (at != std::string::npos) {
      r_.text.resize(at);
      hit = true;
    }
  }
  if (hit) {
    finish("stop");
    return std::nullopt;
  }
  flush(false);
  if (client_gone_) {
    finish("cancelled");
    return std::nullopt;
  }
  // The token just sampled is evaluated next: it must fit, and the request must want more.
  if (r_.completion_tokens >= max_tokens_ || static_cast<int64_t>(history_.size()) > max_len_) {
    finish("length");
    return std::nullopt;
  }
  return id;
}

Result<GenerationResult> generate(Engine& engine, std::span<const int32_t> prompt, const GenerationRequest& request,
                                  int64_t max_tokens, const std::atomic<bool>& cancel,
                                  const std::function<bool(std::string_view)>& on_text) {
  if (prompt.empty()) return invalid_argument("the prompt is empty");
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= engine.n_ctx()) {
    return out_of_range("the prompt has " + std::to_string(n_prompt) + " tokens but the context holds " +
                        std::to_string(engine.n_ctx()));
  }
  Generation gen(engine, request, prompt, max_tokens, engine.n_ctx(), on_text);
  GenerationResult& r = gen.result();
  // Reuse the cached prefix, keeping at least the last prompt token to evaluate (its logits).
  const std::span<const int32_t> cached = engine.cached_tokens();
  int64_t keep = 0;
  while (keep < n_prompt - 1 && keep < static_cast<int64_t>(cached.size()) && cached[keep] == prompt[keep]) ++keep;
  engine.truncate(keep);
  r.cached_tokens = keep;

  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits;
  for (int64_t i = keep; i < n_prompt; i += kPrefillChunk) {
    if (cancel.load(std::memory_order_relaxed)) {
      gen.cancel();
      return r;
    }
    const int64_t n = std::min(kPrefillChunk, n_prompt - i);
    BITNET_ASSIGN_OR_RETURN(logits, engine.eval(prompt.subspan(static_cast<size_t>(i), static_cast<size_t>(n)), false));
  }
  r.prompt_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  for (;;) {
    const std::optional<int32_t> id = gen.next(logits);
    if (!id) break;
    if (cancel.load(std::memory_order_relaxed)) {
      gen.cancel();
      break;
    }
    BITNET_ASSIGN_OR_RETURN(logits, engine.eval(std::span<const int32_t>(&*id, 1), false));
  }
  r.generation_seconds = seconds_since(t0);
  return r;
}

}  // namespace bitnet::server
