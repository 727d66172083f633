// Engine's private state, shared by engine.cpp and receipt.cpp. It is a plain struct
// (EngineCore) so that tests can drive the fallback rules with a fault-injecting backend.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bitnet/engine.h"
#include "core/aligned_vector.h"
#include "core/check.h"
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
  Network model;
  AlignedVector<uint8_t> head_bytes;   // the output head requantized at load (--head-type)
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
  // The sequences in the KV cache, one per open Session. A plain cache (kv_block == 0) holds
  // at most one, sequence 0, without blocks; a paged one (kv_block > 0) any number, each
  // owning blocks of kv_block positions.
  struct Sequence {
    std::vector<int32_t> blocks;
    std::vector<int32_t> tokens;  // in the cache, positions 0..
  };
  // A sequence's new tokens in one forward pass.
  struct SeqTokens {
    int32_t seq;
    std::span<const int32_t> tokens;
  };
  int64_t kv_block = 0;
  std::vector<int32_t> free_blocks;
  // Sequences holding each block: a prefix shared by fork_sequence counts once per holder.
  // A shared block is always full, so no step writes into it.
  std::vector<int32_t> block_refs;
  int32_t take_block() {
    const int32_t b = free_blocks.back();
    free_blocks.pop_back();
    block_refs[static_cast<size_t>(b)] = 1;
    return b;
  }
  void drop_block(int32_t b) {
    if (--block_refs[static_cast<size_t>(b)] == 0) free_blocks.push_back(b);
  }
  std::map<int32_t, Sequence> seqs;
  int32_t next_seq = 0;
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
      return b->init_kv({static_cast<int32_t>(c.n_layer), n_ctx, c.n_embd_kv(), kv_type, kv_block});
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
      return replay_sequences();
    }
    const Status s = failure.with_context(fmt::format("{} failed and no device is left to fall back to", from));
    if (backend == nullptr) broken = s;
    return s;
  }

  // One forward pass of `graph` over `tokens` on the current backend, with
  // the recovery rules: out of memory -> free scratch and retry once; then, or when the
  // device is lost, the next device.
  Status compute(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<float> out) {
    return recovering([&] { return backend->compute(graph, tokens, out); });
  }
  // The same for part of each logits row (Backend::compute_top).
  Status compute_top(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<const hal::TopRequest> req,
                     std::vector<std::vector<hal::TokenLogit>>& out) {
    return recovering([&] { return backend->compute_top(graph, tokens, req, out); });
  }
  template <class Run>
  Status recovering(const Run& run) {
    const auto once = [&] { return guard_alloc("computing", run); };
    Status s = once();
    if (s.code() == StatusCode::kOutOfMemory) {
      log(fmt::format("{}: out of memory, freeing scratch and retrying", device().id));
      backend->release_scratch();
      s = once();
    }
    return s;
  }

  // Evaluates `tokens` at the end of sequence `id` (which must exist), n_batch per forward
  // pass: logits of every token when all_logits, else of the last one.
  Status run(int32_t id, std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    BITNET_RETURN_IF_ERROR(usable());
    if (kv_block > 0) {
      logits.clear();
      for (int64_t i0 = 0; i0 < n; i0 += n_batch) {
        const int64_t n_chunk = std::min(n_batch, n - i0);
        const SeqTokens in{id, tokens.subspan(static_cast<size_t>(i0), static_cast<size_t>(n_chunk))};
        std::vector<float> out;
        BITNET_RETURN_IF_ERROR(forward(std::span(&in, 1), all_logits, out));
        if (all_logits || i0 + n_chunk == n) logits.insert(logits.end(), out.begin(), out.end());
      }
      return {};
    }
    std::vector<int32_t>& history = seqs.at(id).tokens;  // the plain cache's one sequence
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



  // Every sequence's tokens again (on a new device), into the blocks it holds (a prefix
  // shared by forks is written once per holder, with the same values).
  Status replay_sequences() {
    for (auto& [id, seq] : seqs) {
      const std::vector<int32_t> replay = std::move(seq.tokens);
      seq.tokens.clear();
      if (replay.empty()) continue;
      std::vector<float> unused;
      BITNET_RETURN_IF_ERROR(run(id, replay, false, unused));
    }
    return {};
  }

  // The caller's part of a step: open sequences, each once, with tokens of the vocabulary
  // that fit the context after them.
  Status check_step(std::span<const SeqTokens> batch) const {
    if (batch.empty()) return invalid_argument("an empty step");
    const int64_t n_vocab = model.config().n_vocab;
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto it = seqs.find(batch[i].seq);
      if (it == seqs.end()) return invalid_argument(fmt::format("no sequence {}", batch[i].seq));
      for (size_t j = 0; j < i; ++j) {
        if (batch[j].seq == batch[i].seq) return invalid_argument(fmt::format("sequence {} twice in one step", batch[i].seq));
      }
      const std::span<const int32_t> tokens = batch[i].tokens;
      if (tokens.empty()) return invalid_argument("no tokens to evaluate");
      for (int32_t id : tokens) {
        if (id < 0 || id >= n_vocab) return invalid_argument(fmt::format("token id {} is outside the vocabulary (0..{})", id, n_vocab - 1));
      }
      const int64_t n_past = static_cast<int64_t>(it->second.tokens.size());
      if (n_past + static_cast<int64_t>(tokens.size()) > n_ctx) {
        return out_of_range(fmt::format("{} tokens after {} exceed the context length {} (raise -c)", tokens.size(), n_past, n_ctx));
      }
    }
    return {};
  }

  // One step over several sequences (checked): each entry's last logits, [n_entries][n_vocab].
  // A plain cache holds one sequence, so its batches have one entry.
  Status step(std::span<const SeqTokens> batch, std::vector<float>& logits) {
    BITNET_RETURN_IF_ERROR(check_step(batch));
    if (kv_block > 0) return forward(batch, false, logits);
    BITNET_CHECK(batch.size() == 1);
    return run(batch[0].seq, batch[0].tokens, false, logits);
  }

  // A step that gives back part of each entry's last logits row (hal/top.h), selected by the
  // backend (on the device where it can). A plain cache runs step() and selects on the host.
  Status step_top(std::span<const SeqTokens> batch, std::span<const hal::TopRequest> req,
                  std::vector<std::vector<hal::TokenLogit>>& out) {
    if (req.size() != batch.size()) return internal_error("a top request per entry");
    if (kv_block > 0) {
      std::vector<float> unused;
      return forward(batch, false, unused, req, &out);
    }
    std::vector<float> logits;
    BITNET_RETURN_IF_ERROR(step(batch, logits));
    out.resize(1);
    hal::select_top(logits, req[0], out[0]);
    return {};
  }

  // One forward pass over the paged cache: each entry's tokens appended to its sequence.
  // logits: each entry's last row ([n_entries][n_vocab]), or every row of the single entry
  // when all_rows. Blocks are taken from the pool first and given back if the pass fails.
  // With top_out, each entry's row comes back as select_top(row, top[i]) instead (logits stays
  // empty).
  Status forward(std::span<const SeqTokens> batch, bool all_rows, std::vector<float>& logits,
                 std::span<const hal::TopRequest> top = {}, std::vector<std::vector<hal::TokenLogit>>* top_out = nullptr) {
    BITNET_RETURN_IF_ERROR(usable());
    BITNET_RETURN_IF_ERROR(check_step(batch));
    const int64_t n_vocab = model.config().n_vocab;
    int64_t n = 0, need = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto it = seqs.find(batch[i].seq);
      const int64_t len = static_cast<int64_t>(it->second.tokens.size()) + static_cast<int64_t>(batch[i].tokens.size());
      need += std::max<int64_t>(0, (len + kv_block - 1) / kv_block - static_cast<int64_t>(it->second.blocks.size()));
      n += static_cast<int64_t>(batch[i].tokens.size());
    }
    if (all_rows && batch.size() != 1) return internal_error("all rows of several sequences");
    if (need > static_cast<int64_t>(free_blocks.size())) {
      return out_of_range(fmt::format("the KV cache is full: {} more blocks of {} positions needed, {} free", need, kv_block,
                                      free_blocks.size()));
    }
    std::vector<std::pair<int32_t, size_t>> taken;  // (sequence, blocks it had) to roll back
    for (const SeqTokens& in : batch) {
      Sequence& seq = seqs[in.seq];
      taken.emplace_back(in.seq, seq.blocks.size());
      const int64_t len = static_cast<int64_t>(seq.tokens.size() + in.tokens.size());
      if (!seq.blocks.empty() && static_cast<int64_t>(seq.tokens.size()) % kv_block != 0 &&
          block_refs[static_cast<size_t>(seq.blocks.back())] > 1) {
        return internal_error("a step would write into a block another sequence shares");
      }
      while (static_cast<int64_t>(seq.blocks.size()) * kv_block < len) seq.blocks.push_back(take_block());
    }
    std::vector<int32_t> tokens, out_rows;
    hal::KvMap map;
    for (const SeqTokens& in : batch) {
      const Sequence& seq = seqs[in.seq];
      const auto begin = static_cast<int32_t>(map.tables.size());
      map.tables.insert(map.tables.end(), seq.blocks.begin(), seq.blocks.end());
      for (size_t j = 0; j < in.tokens.size(); ++j) {
        map.pos.push_back(static_cast<int32_t>(seq.tokens.size() + j));
        map.table_begin.push_back(begin);
      }
      tokens.insert(tokens.end(), in.tokens.begin(), in.tokens.end());
      out_rows.push_back(static_cast<int32_t>(tokens.size() - 1));
    }
    hal::Graph graph = model.build_graph(n, 0, all_rows ? std::span<const int32_t>{} : std::span<const int32_t>(out_rows));
    graph.kv = std::move(map);
    Status s = guard_alloc("allocating the logits", [&]() -> Status {
      if (top_out == nullptr) logits.assign(static_cast<size_t>((all_rows ? n : static_cast<int64_t>(batch.size())) * n_vocab), 0.0f);
      return {};
    });
    const auto pass = [&] { return top_out != nullptr ? compute_top(graph, tokens, top, *top_out) : compute(graph, tokens, logits); };
    if (s.ok()) s = pass();
    if (s.code() == StatusCode::kOutOfMemory || s.code() == StatusCode::kDeviceLost) {
      s = fall_back(s);
      if (s.ok()) s = pass();
    }
    if (!s.ok()) {
      for (const auto& [id, had] : taken) {
        Sequence& seq = seqs[id];
        while (seq.blocks.size() > had) {
          drop_block(seq.blocks.back());
          seq.blocks.pop_back();
        }
      }
      return s;
    }
    for (const SeqTokens& in : batch) {
      Sequence& seq = seqs[in.seq];
      seq.tokens.insert(seq.tokens.end(), in.tokens.begin(), in.tokens.end());
    }
    return {};
  }

  // Keeps the first n tokens of a sequence (fewer when n ends inside a block another sequence
  // shares: then that block goes too, as the next step would write into it) and gives back
  // the blocks it no longer needs. Returns the tokens kept.
  int64_t truncate_sequence(Sequence& seq, int64_t n) {
    if (n < 0 || n >= static_cast<int64_t>(seq.tokens.size())) return static_cast<int64_t>(seq.tokens.size());
    if (n % kv_block != 0 && block_refs[static_cast<size_t>(seq.blocks[static_cast<size_t>(n / kv_block)])] > 1) {
      n -= n % kv_block;
    }
    seq.tokens.resize(static_cast<size_t>(n));
    while (static_cast<int64_t>(seq.blocks.size()) * kv_block >= n + kv_block) {
      drop_block(seq.blocks.back());
      seq.blocks.pop_back();
    }
    return n;
  }

  // Sessions' sequences. A plain cache holds one, sequence 0.
  Result<int32_t> open_sequence() {
    if (kv_block <= 0) {
      if (!seqs.empty()) {
        return unsupported("a plain KV cache holds one session; several need a paged cache (EngineOptions::kv_block)");
      }
      seqs[0] = {};
      return 0;
    }
    const int32_t id = next_seq++;
    seqs[id] = {};
    return id;
  }

  void close_sequence(int32_t id) {
    const auto it = seqs.find(id);
    if (it == seqs.end()) return;
    for (int32_t b : it->second.blocks) drop_block(b);
    seqs.erase(it);
  }

  // Keeps the first n tokens of sequence `id`; returns how many it kept.
  int64_t truncate(int32_t id, int64_t n) {
    const auto it = seqs.find(id);
    if (it == seqs.end()) return 0;
    std::vector<int32_t>& tokens = it->second.tokens;
    if (kv_block > 0) return truncate_sequence(it->second, n);
    if (n >= 0 && n < static_cast<int64_t>(tokens.size())) tokens.resize(static_cast<size_t>(n));
    return static_cast<int64_t>(tokens.size());
  }

  // A new sequence sharing the whole blocks of `src`'s first n tokens.
  Result<int32_t> fork_sequence(int32_t src, int64_t n) {
    if (kv_block <= 0) return unsupported("forking a session needs a paged KV cache (EngineOptions::kv_block)");
    const auto it = seqs.find(src);
    if (it == seqs.end()) return invalid_argument(fmt::format("no sequence {}", src));
    const int64_t full = std::clamp<int64_t>(n, 0, static_cast<int64_t>(it->second.tokens.size())) / kv_block;
    Sequence fork;
    fork.blocks.assign(it->second.blocks.begin(), it->second.blocks.begin() + full);
    fork.tokens.assign(it->second.tokens.begin(), it->second.tokens.begin() + full * kv_block);
    for (int32_t b : fork.blocks) ++block_refs[static_cast<size_t>(b)];
    const int32_t id = next_seq++;
    seqs[id] = std::move(fork);
    return id;
  }
};


}  // namespace bitnet
