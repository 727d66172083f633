// The single-sequence API: load a GGUF model onto a backend, tokenize, evaluate, generate.
//
//   auto engine = bitnet::Engine::load({.model_path = "model.gguf"});
//   if (!engine.ok()) { /* engine.status().to_string() */ }
//   (*engine)->generate("Once upon a time", params, [](std::string_view piece) { ... });
//
// An Engine is a Model (bitnet/model.h) with one Session of its own, which eval, generate,
// truncate, ... act on. Several sequences at once: open more sessions on it (paged KV cache)
// or load a Model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/model.h"
#include "bitnet/sampling.h"
#include "bitnet/status.h"

namespace bitnet {

struct GenerateStats {
  int64_t n_prompt = 0;
  int64_t n_generated = 0;
  double prompt_seconds = 0.0;
  double generate_seconds = 0.0;
  std::string stop_reason;  // "eog" | "length" | "context" | "stopped" (the callback said so)
  int64_t n_reused = 0;     // prompt tokens found in the KV cache already (generate_tokens)
};

class Engine : public Model {
 public:
  // Model::load, then the engine's own session.
  static Result<std::unique_ptr<Engine>> load(const EngineOptions& options);
  ~Engine() override;

  const ModelSummary& model() const { return summary(); }

  // A JSON receipt of what really ran (schema in docs/design.md): request and selection,
  // backend and device, kernels, fallbacks, model (with the file's SHA-256), tokens, timings.
  Result<std::string> receipt_json(const GenerateStats& stats) const;

  // The engine's own sequence, which the calls below act on (it can fork on a paged cache).
  Session& session() { return session_; }

  // Evaluation over the KV cache: feeds `tokens` at positions n_past().. and returns logits,
  // [n_tokens][n_vocab] when all_logits, else the last token's [n_vocab].
  Result<std::vector<float>> eval(std::span<const int32_t> tokens, bool all_logits);
  int64_t n_past() const { return session_.n_past(); }
  void reset() { truncate(0); }  // forget the sequence (the KV cache is overwritten from position 0)
  // The tokens in the KV cache (positions 0..n_past-1), and keeping only the first n of them
  // (n >= n_past: nothing changes): a prompt that shares a prefix with the cached sequence
  // evaluates only the rest.
  std::span<const int32_t> cached_tokens() const { return session_.tokens(); }
  void truncate(int64_t n) { session_.truncate(n); }

  // Tokenizes the prompt (BOS per the vocabulary), evaluates it and samples up to n_predict
  // tokens, calling on_piece with each token's text as soon as it is sampled.
  Status generate(std::string_view prompt, const SamplingParams& sampling, int64_t n_predict,
                  const std::function<void(std::string_view)>& on_piece, GenerateStats* stats);

  // Generation that continues the sequence in the KV cache, for chats: `prompt` is the whole
  // token sequence (BOS included as the caller wants); the longest prefix it shares with
  // tokens() is kept and only the rest is evaluated (stats->n_reused, n_prompt). Then samples
  // like generate(), calling on_token with each token's id and text; on_token returning false
  // stops the generation (stop_reason "stopped"). The sampled tokens are in the KV cache
  // afterwards, except the last one and an end-of-generation token.
  Status generate_tokens(std::span<const int32_t> prompt, const SamplingParams& sampling, int64_t n_predict,
                         const std::function<bool(int32_t id, std::string_view piece)>& on_token,
                         GenerateStats* stats);

 private:
  Engine(std::shared_ptr<EngineCore> core, Session session);
  Session session_;
};

// llama-perplexity's method: the text (with BOS) is cut into non-overlapping chunks of n_ctx
// tokens, each chunk's first token is BOS, and the second half of each chunk is scored.
struct PerplexityResult {
  double ppl = 0.0;
  int64_t n_chunks = 0;
  int64_t n_scored = 0;
  std::vector<double> chunk_ppl;  // running perplexity after each chunk
};
Result<PerplexityResult> perplexity(Engine& engine, std::string_view text, int64_t n_ctx,
                                    const std::function<void(int64_t chunk, double ppl)>& progress);

}  // namespace bitnet
