// The public API: load a GGUF model onto a backend, tokenize, evaluate, generate.
//
//   auto engine = bitnet::Engine::load({.model_path = "model.gguf"});
//   if (!engine.ok()) { /* engine.status().to_string() */ }
//   (*engine)->generate("Once upon a time", params, [](std::string_view piece) { ... });
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/sampling.h"
#include "bitnet/status.h"

namespace bitnet {

struct EngineOptions {
  std::string model_path;
  std::string device = "auto";  // auto | cpu | gpu | cuda | hip | opencl | vulkan
  std::string gpu_backend;      // narrows the GPU choice to one backend ("" = any)
  int gpu_device = -1;          // narrows the GPU choice to one device index (-1 = any)
  bool strict = false;          // no fallbacks, no fake devices, no suspicious weights
  std::vector<std::string> fake_gpus;  // fake devices for selection tests (ignored when strict)
  int n_threads = 0;            // CPU threads; 0 = every hardware thread
  std::string cpu_isa;          // CPU kernel set ("scalar", "avx2", ...); "" = the best this CPU runs
  std::string head_type;        // requantize the output head at load: "f16" | "q8_0" | "q6_K"; "" = as stored
  std::string cache_type = "f16";  // KV cache elements: "f16" | "f32" (a backend without F16 kernels keeps F32, logged)
  int64_t n_ctx = 0;            // context length; 0 = the model's own
  int64_t n_batch = 512;        // prompt tokens per forward step
  // > 0: a paged KV cache in blocks of this many positions (a power of 2), shared by several
  // sequences (open_sequence, step: `bitnet serve`); n_ctx is then the whole pool's positions.
  // 0: one sequence in a plain cache.
  int64_t kv_block = 0;
  // Receives one line per event worth telling (fallbacks, warnings); may be empty.
  std::function<void(std::string_view)> log;
};

// A device that was tried and given up, and why.
struct Fallback {
  std::string from;    // device id, e.g. "opencl:pocl"
  std::string to;      // the device used instead
  std::string reason;
};

// What was loaded, for logs, `inspect` and receipts.
struct ModelSummary {
  std::string name;
  std::string architecture;
  std::string ffn_act;        // "silu" | "relu2"
  std::string rope;           // "norm" | "neox"
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  bool tied_head = false;
  std::string weight_types;   // e.g. "f32:13 i2_s:14 f16:1"
  uint64_t n_params = 0;
  uint64_t weight_bytes = 0;  // bytes of all weights in the file
  // Weight bytes one decode step reads: every weight but the rows of an untied token embedding
  // (a lookup reads one row). The bandwidth bound of decoding is read GB/s / this.
  uint64_t bytes_per_token = 0;
};

struct GenerateStats {
  int64_t n_prompt = 0;
  int64_t n_generated = 0;
  double prompt_seconds = 0.0;
  double generate_seconds = 0.0;
  std::string stop_reason;  // "eog" | "length" | "context" | "stopped" (the callback said so)
  int64_t n_reused = 0;     // prompt tokens found in the KV cache already (generate_tokens)
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> load(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelSummary& model() const;
  // "requested=auto detected=[cpu-avx2,opencl:pocl] selected=cpu-avx2"
  std::string device_summary() const;
  std::string backend_name() const;   // the selected device's id
  std::string device_name() const;    // its description
  int n_threads() const;
  int64_t n_ctx() const;
  std::string kv_type() const;  // the KV cache's element type as stored: "f16" | "f32"
  std::vector<std::string> kernels_used() const;
  std::vector<Fallback> fallbacks() const;
  std::vector<std::string> warnings() const;  // e.g. suspicious weights outside strict mode

  // A JSON receipt of what really ran (schema in docs/design.md): request and selection,
  // backend and device, kernels, fallbacks, model (with the file's SHA-256), tokens, timings.
  Result<std::string> receipt_json(const GenerateStats& stats) const;

  // Tokenizer.
  std::vector<int32_t> tokenize(std::string_view text, bool add_bos, bool parse_special) const;
  std::string token_to_piece(int32_t id) const;
  std::string detokenize(std::span<const int32_t> ids) const;
  bool add_bos_default() const;
  std::optional<int32_t> bos_id() const;
  bool is_end_of_generation(int32_t id) const;
  int64_t n_vocab() const;

  // Chat templates (bitnet/chat.h): the file's `tokenizer.chat_template` ("" when it has none)
  // and the text of the vocabulary's BOS and EOS tokens ("" when it has none).
  std::string chat_template() const;
  std::string bos_token() const;
  std::string eos_token() const;

  // Evaluation over the KV cache: feeds `tokens` at positions n_past().. and returns logits,
  // [n_tokens][n_vocab] when all_logits, else the last token's [n_vocab].
  Result<std::vector<float>> eval(std::span<const int32_t> tokens, bool all_logits);
  int64_t n_past() const;
  void reset();  // forget the sequence (the KV cache is overwritten from position 0)
  // The tokens in the KV cache (positions 0..n_past-1), and keeping only the first n of them
  // (n >= n_past: nothing changes): a prompt that shares a prefix with the cached sequence
  // evaluates only the rest.
  std::span<const int32_t> cached_tokens() const;
  void truncate(int64_t n);

  // Several sequences in one paged KV cache (EngineOptions::kv_block > 0); the calls above act
  // on sequence 0, opened at load. Each sequence holds blocks for the positions it has used.
  Result<int32_t> open_sequence();
  void close_sequence(int32_t seq);  // its blocks go back to the pool (not sequence 0)
  std::span<const int32_t> sequence_tokens(int32_t seq) const;  // its tokens in the cache
  // Keeps its first n tokens; returns how many it kept (fewer than n when n ends inside a
  // block another sequence shares: the kept tokens end at that block's start).
  int64_t truncate_sequence(int32_t seq, int64_t n);
  // A new sequence that shares the whole blocks of `src`'s first n tokens (no copy, no
  // evaluation: a common prompt prefix); it holds floor(n / kv_block) * kv_block tokens.
  Result<int32_t> fork_sequence(int32_t src, int64_t n);
  int64_t free_kv_positions() const;  // positions of blocks no sequence holds
  struct StepInput {
    int32_t seq;
    std::span<const int32_t> tokens;  // appended at the sequence's end
  };
  // One forward pass over the tokens of several sequences (each at most once): returns the
  // logits of each entry's last token, in order. Nothing changes when it fails (e.g. the
  // pool has too few free blocks: kOutOfRange).
  Result<std::vector<std::vector<float>>> step(std::span<const StepInput> batch);

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
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  static Result<std::unique_ptr<Impl>> load_impl(const EngineOptions& options);
  std::unique_ptr<Impl> impl_;
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
