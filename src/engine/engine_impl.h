// Engine's private state, shared by engine.cpp and receipt.cpp. It is a plain struct
// (EngineCore) so that tests can drive the fallback rules with a fault-injecting backend.
#pragma once

#include <fmt/format.h>

#include <cctype>
#include <functional>
#include <memory>
#include <new>
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

// Bytes of memory the host can still hand out (MemAvailable), 0 when unknown.
uint64_t available_host_memory();

struct EngineCore {
  EngineOptions options;
  gguf::File file;
  Model model;
  std::vector<uint8_t> head_bytes;     // the output head requantized at load (--head-type)
  std::optional<Tokenizer> tokenizer;  // engaged once loaded
  hal::SelectionPlan plan;
  size_t candidate = 0;                // index of the device in use in plan.candidates
  std::unique_ptr<hal::Backend> backend;
  std::vector<Fallback> fallbacks;
  std::vector<std::string> warnings;
  ModelSummary summary;
  int64_t n_ctx = 0;
  int64_t n_batch = 512;
  hal::KvType kv_type = hal::KvType::kF16;  // asked for (options.cache_type); the backend may store F32
  std::vector<int32_t> history;        // tokens in the KV cache (positions 0..n_past-1)
  // Makes the backend of a device; tests swap in one that injects faults (as leveldb's Env).
  std::function<Result<std::unique_ptr<hal::Backend>>(const hal::DeviceInfo&, const EngineOptions&)> make_backend =
      [](const hal::DeviceInfo& d, const EngineOptions& o) { return hal::create_backend(d, {o.n_threads, o.cpu_isa}); };

  const hal::DeviceInfo& device() const { return plan.candidates[candidate]; }
  static std::string upper(std::string_view s) {
    std::string out(s);
    for (char& ch : out) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return out;
  }
  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  // Why the engine has no working device (ok while it has one). Set when a device was lost
  // and no other could take over; every later call that needs a device returns it.
  Status broken;

  Status usable() const {
    if (broken.ok()) return {};
    return {broken.code(), "the engine has no working device (" + broken.message() + "); load the model again"};
  }

  // Runs a backend call, turning std::bad_alloc from host containers (activations, repacked
  // weights, caches) into kOutOfMemory so that the recovery rules below see it.
  template <class F>
  static Status guard_alloc(const char* what, F&& call) {
    try {
      return call();
    } catch (const std::bad_alloc&) {
      return out_of_memory(fmt::format("{}: host memory allocation failed", what));
    }
  }

  // A KV cache larger than the device's memory is refused before any allocation: on the
  // host an over-committed allocation would succeed and the zero-fill would summon the OOM
  // killer. Counted in the type asked for: the CPU stores it; a GPU backend that keeps F32
  // instead allocates device memory, which fails cleanly rather than over-committing.
  Status check_kv_fits(const hal::DeviceInfo& d) const {
    const ModelConfig& c = model.config();
    const double need = 2.0 * static_cast<double>(c.n_layer) * static_cast<double>(n_ctx) *
                        static_cast<double>(c.n_embd_kv()) * static_cast<double>(hal::kv_type_bytes(kv_type));
    const uint64_t have = d.backend == "cpu" ? available_host_memory() : d.memory_bytes;
    if (have == 0 || need <= static_cast<double>(have)) return {};
    return out_of_memory(fmt::format(
        "a context of {} tokens needs a {:.1f} GiB KV cache but {} has {:.1f} GiB available; "
        "ask for a smaller context with -c", n_ctx, need / (1 << 30), d.id, static_cast<double>(have) / (1 << 30)));
  }

  // Creates the backend of candidate `i`, uploads the weights and allocates the KV cache.
  // On failure the current backend (if any) stays in place.
  Status start_device(size_t i) {
    const hal::DeviceInfo& d = plan.candidates[i];
    BITNET_RETURN_IF_ERROR(check_kv_fits(d));
    std::unique_ptr<hal::Backend> b;
    BITNET_RETURN_IF_ERROR(guard_alloc("creating the backend", [&]() -> Status {
      BITNET_ASSIGN_OR_RETURN(b, make_backend(d, options));
      return {};
    }));
    BITNET_RETURN_IF_ERROR(guard_alloc("loading the weights", [&] { return b->load_weights(model.weight_table()); }));
    const ModelConfig& c = model.config();
    BITNET_RETURN_IF_ERROR(guard_alloc("allocating the KV cache", [&] {
      return b->init_kv({static_cast<int32_t>(c.n_layer), n_ctx, c.n_embd_kv(), kv_type});
    }));
    if (const hal::KvType stored = b->stats().kv_type; stored != kv_type) {
      log(fmt::format("{}: {} KV cache not supported, using {}", d.id, upper(hal::kv_type_name(kv_type)),
                      upper(hal::kv_type_name(stored))));
    }
    backend = std::move(b);
    candidate = i;
    return {};
  }

  // Moves to the next candidate after `failure` on the current one (never in strict mode),
  // and replays the tokens already in the KV cache there. When no candidate starts, an out of
  // memory leaves the engine on its device (a smaller request may still fit); a lost device
  // leaves it broken: every later call returns the reason.
  Status fall_back(const Status& failure) {
    const std::string from = device().id;
    if (options.strict) {
      return failure.with_context(fmt::format("{} failed and strict mode forbids falling back", from));
    }
    if (failure.code() == StatusCode::kDeviceLost) backend.reset();  // free what is left of it
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
    const Status s = failure.with_context(fmt::format("{} failed and no device is left to fall back to", from));
    if (backend == nullptr) broken = s;
    return s;
  }

  // One forward pass over `tokens` at position history.size(), on the current backend, with
  // the recovery rules: out of memory -> free scratch and retry once; then, or when the
  // device is lost, the next device.
  Status compute(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<float> out) {
    const auto once = [&] { return guard_alloc("computing", [&] { return backend->compute(graph, tokens, out); }); };
    Status s = once();
    if (s.code() == StatusCode::kOutOfMemory) {
      log(fmt::format("{}: out of memory, freeing scratch and retrying", device().id));
      backend->release_scratch();
      s = once();
    }
    return s;
  }

  Status run(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    BITNET_RETURN_IF_ERROR(usable());
    const int64_t n_vocab = model.config().n_vocab;
    BITNET_RETURN_IF_ERROR(guard_alloc("allocating the logits", [&]() -> Status {
      logits.assign(static_cast<size_t>((all_logits ? n : 1) * n_vocab), 0.0f);
      return {};
    }));
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
