// A model loaded once onto a backend, and the sequences that run on it.
//
//   auto model = bitnet::Model::load({.model_path = "model.gguf", .kv_block = 16});
//   auto a = (*model)->open_session();            // a sequence: its tokens, its KV blocks
//   auto b = (*model)->open_session();
//   std::vector<int32_t> prompt = (*model)->tokenize("Once upon a time", true, false);
//   std::vector<bitnet::Model::StepInput> batch = {{&*a, prompt}, {&*b, prompt}};
//   auto out = (*model)->step(batch);             // one forward pass over both: out[i].logits
//
// `Model` owns the weights (resident on the chosen device), the tokenizer and the KV cache.
// With `EngineOptions::kv_block > 0` the cache is a pool of fixed-size blocks shared by every
// session (paged, as vLLM's): a session takes blocks as it grows and gives them back when it
// is truncated or closed; a fork shares its source's whole prefix blocks without copying.
// With kv_block == 0 the cache is one plain sequence: one session at a time.
// `Engine` (bitnet/engine.h) is a Model with one session of its own, for single-sequence use.
//
// A Model and its sessions are not thread-safe: one thread at a time calls them (the const
// tokenizer calls may run on any thread). A session is a handle: it never keeps the model
// alive, and once the model is gone every call on it is an error (or empty), never a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/devices.h"
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
  int64_t n_batch = 512;        // prompt tokens per forward step (Session::eval)
  // > 0: a paged KV cache in blocks of this many positions (a power of 2), shared by several
  // sessions (`bitnet serve`); n_ctx is then the whole pool's positions.
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
  int64_t n_embd_kv = 0;      // n_head_kv x head size: K (and V) elements a layer caches per position
  int64_t n_ff = 0;
  bool tied_head = false;
  std::string weight_types;   // e.g. "f32:13 i2_s:14 f16:1"
  uint64_t n_params = 0;
  uint64_t weight_bytes = 0;  // bytes of all weights in the file
  // Weight bytes one decode step reads: every weight but the rows of an untied token embedding
  // (a lookup reads one row), as the device stores them (the CPU's 1.6-bit ternary repack reads
  // fewer bytes than a TQ2_0 or I2_S file holds). The bandwidth bound of decoding is read GB/s / this.
  uint64_t bytes_per_token = 0;
};

struct EngineCore;  // the loaded state (src/engine/engine_impl.h)
class Session;

class Model {
 public:
  // Maps the file, selects the device (falling back as EngineOptions allow), uploads the
  // weights and allocates the KV cache.
  static Result<std::unique_ptr<Model>> load(const EngineOptions& options);
  virtual ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelSummary& summary() const;
  // "requested=auto detected=[cpu-avx2,opencl:pocl] selected=cpu-avx2"
  std::string device_summary() const;
  std::string backend_name() const;   // the selected device's id
  const DeviceDescription& device() const;  // the selected device, as the probe described it
  std::string device_name() const;    // its description
  int n_threads() const;
  int64_t n_ctx() const;     // positions of the KV cache (paged: the whole pool)
  int64_t kv_block() const;  // positions per block; 0: a plain cache (one session)
  std::string kv_type() const;  // the KV cache's element type as stored: "f16" | "f32"
  std::vector<std::string> kernels_used() const;
  std::vector<Fallback> fallbacks() const;
  std::vector<std::string> warnings() const;  // e.g. suspicious weights outside strict mode

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

  // A new, empty sequence. A plain cache (kv_block == 0) holds one: a second open session is
  // kUnsupported.
  Result<Session> open_session();

  struct StepInput {
    Session* session;
    std::span<const int32_t> tokens;  // appended at the session's end
    // What comes back of the last token's logits: the whole row (top == 0, StepOutput::logits),
    // or its `top` largest logits with their ids (ties go to the lower ids; in any order) and
    // then the logits of the ids in `also` (StepOutput::top). That part is what a top-k sampler
    // needs, and a GPU backend selects it on the device instead of copying the row back, in a
    // step where every entry asks for a part (otherwise the step's rows come back whole and
    // the parts are selected on the host).
    int32_t top = 0;
    std::span<const int32_t> also = {};
  };
  struct StepOutput {
    std::vector<float> logits;    // [n_vocab], when the entry's top == 0
    std::vector<TokenLogit> top;  // when top > 0: min(top, n_vocab) entries, then `also`'s (ids outside the vocabulary skipped)
  };
  // One forward pass over the new tokens of several sessions of this model (each at most
  // once; prefill chunks and decode tokens mixed, each at its own positions): each entry's
  // last logits, in order. Nothing changes when it fails (a closed session or one of another
  // model: kInvalidArgument; too few free blocks or a full context: kOutOfRange).
  Result<std::vector<StepOutput>> step(std::span<const StepInput> batch);
  int64_t free_kv_positions() const;  // positions of blocks no session holds

 protected:
  explicit Model(std::shared_ptr<EngineCore> core);
  static Result<std::shared_ptr<EngineCore>> load_core(const EngineOptions& options);
  EngineCore& core() const { return *core_; }

 private:
  std::shared_ptr<EngineCore> core_;
};

// A sequence in a Model's KV cache: its tokens (positions 0..n_past-1) and the blocks that
// hold them. Move-only; destroying (or closing) it gives its blocks back to the pool (a block
// shared by a fork goes back when its last holder lets go). A default-constructed, moved-from
// or closed session is closed: eval/fork are kInvalidArgument, tokens() is empty.
class Session {
 public:
  Session() = default;
  Session(Session&& other) noexcept;
  Session& operator=(Session&& other) noexcept;
  ~Session();

  bool is_open() const;  // false when closed or its model is gone
  void close();

  std::span<const int32_t> tokens() const;  // in the KV cache; valid until the next call that changes them
  int64_t n_past() const { return static_cast<int64_t>(tokens().size()); }

  // Feeds `tokens` at positions n_past().. (n_batch per forward pass) and returns logits,
  // [n_tokens][n_vocab] when all_logits, else the last token's [n_vocab].
  Result<std::vector<float>> eval(std::span<const int32_t> tokens, bool all_logits);

  // Keeps the first n tokens (n >= n_past: nothing changes) and returns how many it kept:
  // fewer than n when n ends inside a block another session shares (the kept tokens end at
  // that block's start, as the next step would write into it). Closed: 0.
  int64_t truncate(int64_t n);

  // A new session sharing the whole blocks of this one's first n tokens (no copy, no
  // evaluation: a common prompt prefix); it holds floor(n / kv_block) * kv_block tokens.
  // A plain cache cannot fork (kUnsupported).
  Result<Session> fork(int64_t n) const;

 private:
  friend class Model;
  friend class Engine;
  Session(const std::shared_ptr<EngineCore>& core, int32_t seq) : core_(core), seq_(seq) {}
  std::shared_ptr<EngineCore> open_core() const;  // null when closed or the model is gone

  std::weak_ptr<EngineCore> core_;
  int32_t seq_ = -1;
};

}  // namespace bitnet
