// Counters for GET /metrics (Prometheus text format 0.0.4).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace bitnet::server {

struct GenerationResult;

struct Metrics {
  std::atomic<int64_t> requests{0};           // generation requests accepted
  std::atomic<int64_t> requests_rejected{0};  // 4xx/5xx before running (bad input, full queue)
  std::atomic<int64_t> requests_cancelled{0};
  std::atomic<int64_t> queue_depth{0};
  std::atomic<int64_t> running{0};              // sequences in the last step
  std::atomic<int64_t> running_peak{0};         // most sequences in one step
  std::atomic<int64_t> steps{0};                // forward steps run
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> cached_prompt_tokens{0};  // prompt tokens found in the KV cache
  std::atomic<int64_t> prefix_cache_hits{0};     // requests that reused a cached prefix
  std::atomic<int64_t> completion_tokens{0};
  std::atomic<int64_t> kv_used{0};               // positions in the KV cache
  int64_t kv_size = 0;

  void record(const GenerationResult& r);
  std::string prometheus() const;

 private:
  mutable std::mutex mu_;
  double prompt_seconds_ = 0.0;
  double generation_seconds_ = 0.0;
  double last_decode_tps_ = 0.0;
};

}  // namespace bitnet::server
