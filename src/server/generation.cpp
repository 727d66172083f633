#include "server/generation.h"

#include <algorithm>
#include <chrono>

#include "model/sampler.h"

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

Result<GenerationResult> generate(Engine& engine, std::span<const int32_t> prompt, const GenerationRequest& request,
                                  int64_t max_tokens, const std::atomic<bool>& cancel,
                                  const std::function<bool(std::string_view)>& on_text) {
  GenerationResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (prompt.empty()) return invalid_argument("the prompt is empty");
  if (r.prompt_tokens >= engine.n_ctx()) {
    return out_of_range("the prompt has " + std::to_string(r.prompt_tokens) + " tokens but the context holds " +
                        std::to_string(engine.n_ctx()));
  }
  // Reuse the cached prefix, keeping at least the last prompt token to evaluate (its logits).
  const std::span<const int32_t> cached = engine.cached_tokens();
  int64_t keep = 0;
  while (keep < r.prompt_tokens - 1 && keep < static_cast<int64_t>(cached.size()) && cached[keep] == prompt[keep]) ++keep;
  engine.truncate(keep);
  r.cached_tokens = keep;

  bool stopped = false;
  const auto cancelled = [&] { return stopped || cancel.load(std::memory_order_relaxed); };
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits;
  for (int64_t i = keep; i < r.prompt_tokens; i += kPrefillChunk) {
    if (cancelled()) {
      r.finish_reason = "cancelled";
      return r;
    }
    const int64_t n = std::min(kPrefillChunk, r.prompt_tokens - i);
    BITNET_ASSIGN_OR_RETURN(logits, engine.eval(prompt.subspan(static_cast<size_t>(i), static_cast<size_t>(n)), false));
  }
  r.prompt_seconds = seconds_since(t0);

  std::vector<int32_t> history(prompt.begin(), prompt.end());
  Sampler sampler(request.sampling);
  size_t sent = 0;      // bytes of r.text sent
  const auto flush = [&](bool final) {
    const size_t hold = final ? 0 : held_back(std::string_view(r.text).substr(sent), request.stop);
    const size_t upto = r.text.size() - hold;
    if (upto > sent) {
      if (!on_text(std::string_view(r.text).substr(sent, upto - sent))) stopped = true;
      sent = upto;
    }
  };
  t0 = std::chrono::steady_clock::now();
  r.finish_reason = "length";
  for (int64_t i = 0; i < max_tokens; ++i) {
    const int32_t id = sampler.sample(logits, history);
    if (engine.is_end_of_generation(id)) {
      r.finish_reason = "stop";
      break;
    }
    history.push_back(id);
    ++r.completion_tokens;
    const size_t before = r.text.size();
    r.text += engine.token_to_piece(id);
    // A stop string may end inside this piece: cut the text where it starts.
    bool hit = false;
    for (const std::string& s : request.stop) {
      const size_t from = before >= s.size() ? before - s.size() + 1 : 0;
      const size_t at = r.text.find(s, from);
      if (at != std::string::npos) {
        r.text.resize(at);
        hit = true;
      }
    }
    if (hit) {
      r.finish_reason = "stop";
      break;
    }
    flush(false);
    if (cancelled()) {
      r.finish_reason = "cancelled";
      break;
    }
    if (i + 1 == max_tokens) break;
    if (engine.n_past() >= engine.n_ctx()) break;  // "length": the context is full
    BITNET_ASSIGN_OR_RETURN(logits, engine.eval(std::span<const int32_t>(&id, 1), false));
  }
  if (r.finish_reason != "cancelled") flush(true);
  r.generation_seconds = seconds_since(t0);
  return r;
}

}  // namespace bitnet::server
