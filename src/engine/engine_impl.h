// Engine's private state, shared by engine.cpp and receipt.cpp. It is a plain struct
// (EngineCore) so that tests can drive the fallback rules with a fault-injecting backend.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bitnet/engine.h"
#include "gguf/gguf.h"
#include "hal/backend.h"
#include "hal/registry.h"
#include "hal/selection.h"
#include "model/model.h"
#include "model/tokenizer/tokenizer.h"

namespace bitnet {

struct EngineCore {
  EngineOptions options;
  gguf::File file;
  Model model;
  std::optional<Tokenizer> tokenizer;  // engaged once loaded
  hal::SelectionPlan plan;
  size_t candidate = 0;                // index of the device in use in plan.candidates
  std::unique_ptr<hal::Backend> backend;
  std::vector<Fallback> fallbacks;
  std::vector<std::string> warnings;
  ModelSummary summary;
  int64_t n_ctx = 0;
  int64_t n_batch = 512;
  std::vector<int32_t> history;        // tokens in the KV cache (positions 0..n_past-1)
  // Makes the backend of a device; tests swap in one that injects faults (as leveldb's Env).
  std::function<Result<std::unique_ptr<hal::Backend>>(const hal::DeviceInfo&, int)> make_backend =
      hal::create_backend;

  const hal::DeviceInfo& device() const { return plan.candidates[candidate]; }
  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  // Creates the backend of candidate `i`, uploads the weights and allocates the KV cache.
  Status start_device(size_t i) {
    const hal::DeviceInfo& d = plan.candidates[i];
    BITNET_ASSIGN_OR_RETURN(std::unique_ptr<hal::Backend> b, make_backend(d, options.n_threads));
    BITNET_RETURN_IF_ERROR(b->load_weights(model.weight_table()));
    const ModelConfig& c = model.config();
    BITNET_RETURN_IF_ERROR(b->init_kv({static_cast<int32_t>(c.n_layer), n_ctx, c.n_embd_kv()}));
    backend = std::move(b);
    candidate = i;
    return {};
  }

  // Moves to the next candidate after `failure` on the current one (never in strict mode),
  // and replays the tokens already in the KV cache there.
  Status fall_back(const Status& failure) {
    const std::string from = device().id;
    if (options.strict) {
      return failure.with_context(fmt::format("{} failed and strict mode forbids falling back", from));
    }
    backend.reset();
    for (size_t i = candidate + 1; i < plan.candidates.size(); ++i) {
      const Status s = start_device(i);
      if (!s.ok()) {
        fallbacks.push_back({plan.candidates[i].id, "", s.to_string()});
        continue;
      }
      fallbacks.push_back({from, device().id, failure.to_string()});
      log(fmt::format("fallback: {} -> {}: {}", from, device().id, failure.to_string()));
      const std::vector<int32_t> replay = std::move(history);
      history.clear();
      if (!replay.empty()) {
        std::vector<float> unused;
        BITNET_RETURN_IF_ERROR(run(replay, false, unused));
      }
      return {};
    }
    return failure.with_context(fmt::format("{} failed and no device is left to fall back to", from));
  }

  // One forward pass over `tokens` at position history.size(), on the current backend, with
  // the recovery rules: out of memory -> free scratch and retry once; then, or when the
  // device is lost, the next device.
  Status compute(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<float> out) {
    Status s = backend->compute(graph, tokens, out);
    if (s.code() == StatusCode::kOutOfMemory) {
      log(fmt::format("{}: out of memory, freeing scratch and retrying", device().id));
      backend->release_scratch();
      s = backend->compute(graph, tokens, out);
    }
    return s;
  }

  Status run(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    const int64_t n_vocab = model.config().n_vocab;
    logits.assign(static_cast<size_t>((all_logits ? n : 1) * n_vocab), 0.0f);
    for (int64_t i0 = 0; i0 < n; i0 += n_batch) {
      const int64_t n_chunk = std::min(n_batch, n - i0);
      const int64_t pos0 = static_cast<int64_t>(history.size());
      const hal::Graph graph = model.build_graph(n_chunk, pos0, all_logits ? LogitRows::kAll : LogitRows::kLast);
      std::span<float> out = all_logits
          ? std::span<float>(logits).subspan(static_cast<size_t>(i0 * n_vocab), static_cast<size_t>(n_chunk * n_vocab))
          : std::span<float>(logits);
      const auto chunk = tokens.subspan(static_cast<size_t>(i0), static_cast<size_t>(n_chunk));
      Status s = compute(graph, chunk, out);
      if (s.code() == StatusCode::kOutOfMemory || s.code() == StatusCode::kDeviceLost) {
        BITNET_RETURN_IF_ERROR(fall_back(s));
        s = compute(graph, chunk, out);
      }
      BITNET_RETURN_IF_ERROR(s);
      history.insert(history.end(), chunk.begin(), chunk.end());
    }
    return {};
  }
};


struct Engine::Impl : EngineCore {};

}  // namespace bitnet
