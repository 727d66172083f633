#include "server/metrics.h"

#include <fmt/format.h>

#include "server/generation.h"

namespace bitnet::server {

void Metrics::record(const GenerationResult& r) {
  prompt_tokens += r.prompt_tokens;
  cached_prompt_tokens += r.cached_tokens;
  completion_tokens += r.completion_tokens;
  if (r.finish_reason == "cancelled") ++requests_cancelled;
  std::lock_guard<std::mutex> lock(mu_);
  prompt_seconds_ += r.prompt_seconds;
  generation_seconds_ += r.generation_seconds;
  if (r.generation_seconds > 0) last_decode_tps_ = static_cast<double>(r.completion_tokens) / r.generation_seconds;
}

std::string Metrics::prometheus() const {
  std::string out;
  const auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP bitnet_{} {}\n# TYPE bitnet_{} {}\nbitnet_{} {}\n", name, help, name, type, name, value);
  };
  metric("requests_total", "counter", "Generation requests accepted.", requests.load());
  metric("requests_rejected_total", "counter", "Requests answered with an error before running.", requests_rejected.load());
  metric("requests_cancelled_total", "counter", "Generations stopped because the client went away.", requests_cancelled.load());
  metric("queue_depth", "gauge", "Requests waiting for the engine.", queue_depth.load());
  metric("batch_size", "gauge", "Sequences in the last step.", running.load());
  metric("batch_size_peak", "gauge", "Most sequences in one step.", running_peak.load());
  metric("steps_total", "counter", "Forward steps run.", steps.load());
  metric("prompt_tokens_total", "counter", "Prompt tokens received.", prompt_tokens.load());
  metric("completion_tokens_total", "counter", "Tokens generated.", completion_tokens.load());
  metric("prefix_cache_hits_total", "counter", "Requests whose prompt prefix was found in the KV cache.", prefix_cache_hits.load());
  metric("prefix_cache_tokens_total", "counter", "Prompt tokens served from the KV cache.", cached_prompt_tokens.load());
  metric("kv_positions_used", "gauge", "KV cache positions holding a sequence.", kv_used.load());
  metric("kv_positions_free", "gauge", "KV cache positions free.", kv_size - kv_used.load());
  std::lock_guard<std::mutex> lock(mu_);
  metric("prompt_seconds_total", "counter", "Seconds spent on prompts.", prompt_seconds_);
  metric("generation_seconds_total", "counter", "Seconds spent generating.", generation_seconds_);
  metric("decode_tokens_per_second", "gauge", "Decode speed of the last request.", last_decode_tps_);
  return out;
}

}  // namespace bitnet::server
