#include "server/generation.h"

#include <algorithm>

namespace bitnet::server {

namespace {

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

Generation::Generation(const Model& model, const GenerationRequest& request, std::span<const int32_t> prompt,
                       int64_t max_tokens, int64_t max_len, std::function<bool(std::string_view)> on_text)
    : model_(model),
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

const std::optional<hal::TopRequest>& Generation::wants() {
  wants_ = sampler_.wants(history_);
  return wants_;
}

std::optional<int32_t> Generation::next(const Model::StepOutput& out) {
  if (finished_) return std::nullopt;
  if (client_gone_) {
    finish("cancelled");
    return std::nullopt;
  }
  if (r_.completion_tokens >= max_tokens_) {
    finish("length");
    return std::nullopt;
  }
  const int32_t id = out.logits.empty() ? sampler_.sample_top(out.top, history_) : sampler_.sample(out.logits, history_);
  if (model_.is_end_of_generation(id)) {
    finish("stop");
    return std::nullopt;
  }
  history_.push_back(id);
  ++r_.completion_tokens;
  const size_t before = r_.text.size();
  r_.text += model_.token_to_piece(id);
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

}  // namespace bitnet::server
