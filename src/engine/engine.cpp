#include "bitnet/engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <new>
#include <map>

#include "engine/engine_impl.h"
#include "engine/summary.h"
#include "gguf/gguf.h"
#include "hal/registry.h"
#include "hal/selection.h"
#include "model/model.h"
#include "model/requantize.h"
#include "quant/quant.h"
#include "model/sampler.h"
#include "model/tokenizer/tokenizer.h"
#include "model/weight_check.h"

namespace bitnet {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

uint64_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

ModelSummary summarize_model(const Network& m) {
  const ModelConfig& c = m.config();
  ModelSummary s;
  s.name = c.name;
  s.architecture = c.arch_name;
  s.ffn_act = std::string(ffn_act_name(c.ffn_act));
  s.rope = c.rope_style == hal::RopeStyle::kNeox ? "neox" : "norm";
  s.n_vocab = c.n_vocab;
  s.n_ctx_train = c.n_ctx_train;
  s.n_embd = c.n_embd;
  s.n_layer = c.n_layer;
  s.n_head = c.n_head;
  s.n_head_kv = c.n_head_kv;
  s.n_ff = c.n_ff;
  s.tied_head = m.tied_head();
  std::map<std::string, int> types;
  const auto table = m.weight_table();
  for (size_t i = 0; i < table.size(); ++i) {
    const hal::WeightDesc& w = table[i];
    types[std::string(ggml_type_name(w.type))]++;
    s.n_params += static_cast<uint64_t>(w.ne[0] * w.ne[1] * w.ne[2] * w.ne[3]);
    s.weight_bytes += w.bytes.size();
    const bool lookup_only = static_cast<hal::WeightId>(i) == m.weights().token_embd && !m.tied_head();
    if (!lookup_only) s.bytes_per_token += w.bytes.size();
  }
  for (const auto& [name, count] : types) {
    s.weight_types += fmt::format("{}{}:{}", s.weight_types.empty() ? "" : " ", name, count);
  }
  return s;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

namespace {

// --head-type: the output head (tied: the token embedding too) in another type.
Status requantize_head(EngineCore& impl) {
  BITNET_ASSIGN_OR_RETURN(const GgmlType type, parse_head_type(impl.options.head_type));
  const hal::WeightId id = impl.model.weights().output;
  const hal::WeightDesc& head = impl.model.weight_table()[static_cast<size_t>(id)];
  if (head.type == type) return {};
  if (quant::is_ternary(head.type)) return unsupported(fmt::format("{} is ternary; --head-type needs a float head", head.name));
  impl.log(fmt::format("requantizing {} from {} to {}", head.name, ggml_type_name(head.type), ggml_type_name(type)));
  BITNET_ASSIGN_OR_RETURN(impl.head_bytes, requantize_rows(head, type, impl.options.n_threads));
  impl.model.replace_weight(id, type, impl.head_bytes);
  return {};
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  // Containers sized from the file (vocabulary, tensor tables) may still fail to grow.
  try {
    BITNET_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, load_impl(options));
    return std::unique_ptr<Engine>(new Engine(std::move(impl)));
  } catch (const std::bad_alloc&) {
    return out_of_memory(options.model_path + ": host memory allocation failed while loading");
  }
}

Result<std::unique_ptr<Engine::Impl>> Engine::load_impl(const EngineOptions& options) {
  if (options.n_ctx < 0) return invalid_argument("context length must not be negative");
  if (options.n_batch <= 0) return invalid_argument("batch size must be positive");
  if (options.kv_block < 0 || options.kv_block > 4096 || (options.kv_block & (options.kv_block - 1)) != 0) {
    return invalid_argument(fmt::format("KV block size {} is not a power of 2 up to 4096 (0: no paging)", options.kv_block));
  }
  if (options.cache_type != "f16" && options.cache_type != "f32") {
    return invalid_argument(fmt::format("unknown KV cache type '{}' (allowed: f16, f32)", options.cache_type));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->kv_type = options.cache_type == "f32" ? hal::KvType::kF32 : hal::KvType::kF16;
  const std::string& path = options.model_path;
  BITNET_ASSIGN_OR_RETURN(impl->file, gguf::File::open(path));
  auto model = Network::from_gguf(impl->file);
  if (!model.ok()) return model.status().with_context(path);
  impl->model = std::move(model).value();
  if (!options.head_type.empty()) BITNET_RETURN_IF_ERROR(requantize_head(*impl).with_context(path));
  auto tokenizer = Tokenizer::from_gguf(impl->file);
  if (!tokenizer.ok()) return tokenizer.status();  // it names the file
  impl->tokenizer = std::move(tokenizer).value();
  const ModelConfig& c = impl->model.config();
  if (impl->tokenizer->n_vocab() > c.n_vocab) {
    return corrupt_file(fmt::format("{}: the vocabulary has {} tokens but the embedding only {} rows",
                                    path, impl->tokenizer->n_vocab(), c.n_vocab));
  }
  impl->n_ctx = options.n_ctx > 0 ? options.n_ctx : c.n_ctx_train;
  impl->n_batch = options.n_batch;
  if (options.kv_block > 0) {  // a pool of whole blocks, sequence 0 open
    impl->kv_block = options.kv_block;
    impl->n_ctx = (impl->n_ctx + options.kv_block - 1) / options.kv_block * options.kv_block;
    for (int64_t b = impl->n_ctx / options.kv_block - 1; b >= 0; --b) impl->free_blocks.push_back(static_cast<int32_t>(b));
    impl->block_refs.assign(static_cast<size_t>(impl->n_ctx / options.kv_block), 0);
    impl->seqs[0] = {};
  }

  for (const std::string& w : find_suspicious_weights(impl->model)) {
    if (options.strict) return suspicious_weights(fmt::format("{}: {} (strict mode)", path, w));
    impl->warnings.push_back("suspicious weight " + w);
    impl->log("warning: suspicious weight " + w);
  }

  hal::ProbeOptions probe_options;
  if (!options.strict) probe_options.fake_gpus = options.fake_gpus;  // strict ignores fakes
  probe_options.cpu_isa = options.cpu_isa;
  const std::vector<hal::BackendProbe> probes = hal::probe_backends(probe_options);
  BITNET_ASSIGN_OR_RETURN(impl->plan, hal::plan_selection(probes, {options.device, options.gpu_backend,
                                                                   options.gpu_device, options.strict}));
  if (options.device != "auto" && options.device != "cpu") {
    for (const std::string& note : impl->plan.notes) impl->log("note: " + note);
  }
  // Candidates in order; strict mode takes the first or nothing.
  Status last;
  bool started = false;
  for (size_t i = 0; i < impl->plan.candidates.size() && !started; ++i) {
    last = impl->start_device(i);
    started = last.ok();
    if (!started) {
      const std::string& id = impl->plan.candidates[i].id;
      if (options.strict) return last.with_context(fmt::format("{}: strict mode forbids falling back", id));
      impl->fallbacks.push_back({id, "", last.to_string()});
    }
  }
  if (!started) return last.with_context(path);
  for (Fallback& f : impl->fallbacks) {
    f.to = impl->device().id;
    impl->log(fmt::format("fallback: {} -> {}: {}", f.from, f.to, f.reason));
  }
  impl->summary = summarize_model(impl->model);
  return impl;
}

const ModelSummary& Engine::model() const { return impl_->summary; }
std::string Engine::device_summary() const {
  return fmt::format("requested={} detected=[{}] selected={}", impl_->options.device,
                     fmt::join(impl_->plan.detected, ","), impl_->device().id);
}
std::string Engine::backend_name() const { return impl_->device().id; }
// A broken engine (see EngineCore::broken) has no backend: these report that instead.
std::string Engine::device_name() const {
  return impl_->backend ? impl_->backend->info().device : "none (" + impl_->broken.message() + ")";
}
int Engine::n_threads() const { return impl_->backend ? impl_->backend->info().n_threads : 0; }
int64_t Engine::n_ctx() const { return impl_->n_ctx; }
std::string Engine::kv_type() const {
  return std::string(hal::kv_type_name(impl_->backend ? impl_->backend->stats().kv_type : impl_->kv_type));
}
std::vector<std::string> Engine::kernels_used() const {
  return impl_->backend ? impl_->backend->kernels_used() : std::vector<std::string>{};
}
std::vector<Fallback> Engine::fallbacks() const { return impl_->fallbacks; }
std::vector<std::string> Engine::warnings() const { return impl_->warnings; }

std::vector<int32_t> Engine::tokenize(std::string_view text, bool add_bos, bool parse_special) const {
  return impl_->tokenizer->encode(text, add_bos, parse_special);
}
std::string Engine::token_to_piece(int32_t id) const { return impl_->tokenizer->token_to_piece(id); }
std::string Engine::detokenize(std::span<const int32_t> ids) const { return impl_->tokenizer->decode(ids); }
bool Engine::add_bos_default() const { return impl_->tokenizer->add_bos_default(); }
std::optional<int32_t> Engine::bos_id() const { return impl_->tokenizer->bos_id(); }
bool Engine::is_end_of_generation(int32_t id) const { return impl_->tokenizer->is_end_of_generation(id); }
int64_t Engine::n_vocab() const { return impl_->model.config().n_vocab; }
int64_t Engine::n_past() const { return static_cast<int64_t>(cached_tokens().size()); }
void Engine::reset() { truncate(0); }

std::span<const int32_t> Engine::cached_tokens() const {
  return impl_->kv_block > 0 ? std::span<const int32_t>(impl_->seqs.at(0).tokens) : std::span<const int32_t>(impl_->history);
}

void Engine::truncate(int64_t n) {
  if (impl_->kv_block > 0) {
    impl_->truncate_sequence(impl_->seqs.at(0), n);
    return;
  }
  if (n >= 0 && n < static_cast<int64_t>(impl_->history.size())) impl_->history.resize(static_cast<size_t>(n));
}

Result<int32_t> Engine::open_sequence() {
  if (impl_->kv_block <= 0) return unsupported("several sequences need a paged KV cache (EngineOptions::kv_block)");
  const int32_t id = impl_->next_seq++;
  impl_->seqs[id] = {};
  return id;
}

void Engine::close_sequence(int32_t seq) {
  const auto it = impl_->seqs.find(seq);
  if (seq == 0 || it == impl_->seqs.end()) return;
  impl_->truncate_sequence(it->second, 0);
  for (int32_t b : it->second.blocks) impl_->drop_block(b);
  impl_->seqs.erase(it);
}

Result<int32_t> Engine::fork_sequence(int32_t src, int64_t n) {
  if (impl_->kv_block <= 0) return unsupported("several sequences need a paged KV cache (EngineOptions::kv_block)");
  const auto it = impl_->seqs.find(src);
  if (it == impl_->seqs.end()) return invalid_argument(fmt::format("no sequence {}", src));
  const int64_t full = std::min<int64_t>(n, static_cast<int64_t>(it->second.tokens.size())) / impl_->kv_block;
  EngineCore::Sequence fork;
  fork.blocks.assign(it->second.blocks.begin(), it->second.blocks.begin() + full);
  fork.tokens.assign(it->second.tokens.begin(), it->second.tokens.begin() + full * impl_->kv_block);
  for (int32_t b : fork.blocks) ++impl_->block_refs[static_cast<size_t>(b)];
  const int32_t id = impl_->next_seq++;
  impl_->seqs[id] = std::move(fork);
  return id;
}

std::span<const int32_t> Engine::sequence_tokens(int32_t seq) const {
  if (impl_->kv_block <= 0) return seq == 0 ? cached_tokens() : std::span<const int32_t>{};
  const auto it = impl_->seqs.find(seq);
  return it == impl_->seqs.end() ? std::span<const int32_t>{} : std::span<const int32_t>(it->second.tokens);
}

int64_t Engine::truncate_sequence(int32_t seq, int64_t n) {
  if (impl_->kv_block <= 0) {
    if (seq == 0) truncate(n);
    return seq == 0 ? n_past() : 0;
  }
  const auto it = impl_->seqs.find(seq);
  return it == impl_->seqs.end() ? 0 : impl_->truncate_sequence(it->second, n);
}

int64_t Engine::free_kv_positions() const {
  if (impl_->kv_block <= 0) return impl_->n_ctx - n_past();
  return static_cast<int64_t>(impl_->free_blocks.size()) * impl_->kv_block;
}

Result<std::vector<std::vector<float>>> Engine::step(std::span<const StepInput> batch) {
  if (impl_->kv_block <= 0) return unsupported("several sequences need a paged KV cache (EngineOptions::kv_block)");
  std::vector<float> flat;
  BITNET_RETURN_IF_ERROR(impl_->forward(batch, false, flat));
  const auto n_vocab = static_cast<size_t>(impl_->model.config().n_vocab);
  std::vector<std::vector<float>> out(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) out[i].assign(flat.begin() + i * n_vocab, flat.begin() + (i + 1) * n_vocab);
  return out;
}

std::string Engine::chat_template() const {
  auto t = impl_->file.get_string("tokenizer.chat_template");
  return t.ok() && t->has_value() ? std::string(**t) : std::string();
}
std::string Engine::bos_token() const {
  const std::optional<int32_t> id = impl_->tokenizer->bos_id();
  return id ? impl_->tokenizer->token_text(*id) : std::string();
}
std::string Engine::eos_token() const {
  const std::optional<int32_t> id = impl_->tokenizer->eos_id();
  return id ? impl_->tokenizer->token_text(*id) : std::string();
}

Result<std::vector<float>> Engine::eval(std::span<const int32_t> tokens, bool all_logits) {
  Impl& m = *impl_;
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return invalid_argument("no tokens to evaluate");
  if (n_past() + n > m.n_ctx) {
    return out_of_range(fmt::format("{} tokens after {} exceed the context length {} (raise -c)",
                                    n, n_past(), m.n_ctx));
  }
  const int64_t n_vocab = m.model.config().n_vocab;
  for (int32_t id : tokens) {
    if (id < 0 || id >= n_vocab) {
      return invalid_argument(fmt::format("token id {} is outside the vocabulary (0..{})", id, n_vocab - 1));
    }
  }
  std::vector<float> logits;
  BITNET_RETURN_IF_ERROR(m.run(tokens, all_logits, logits));
  return logits;
}

Status Engine::generate(std::string_view prompt, const SamplingParams& sampling, int64_t n_predict,
                        const std::function<void(std::string_view)>& on_piece, GenerateStats* stats) {
  const std::vector<int32_t> tokens = tokenize(prompt, add_bos_default(), /*parse_special=*/true);
  if (tokens.empty()) return invalid_argument("the prompt is empty and the vocabulary has no BOS token");
  // A SentencePiece vocabulary marks word starts with a space; at the very start of the
  // text that space is not part of it (llama.cpp and run.c strip it the same way).
  bool at_text_start = prompt.empty() && impl_->tokenizer->kind() == TokenizerKind::kSpm;
  reset();
  return generate_tokens(tokens, sampling, n_predict,
                         [&](int32_t, std::string_view piece) {
                           if (at_text_start && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
                           at_text_start = at_text_start && piece.empty();
                           on_piece(piece);
                           return true;
                         },
                         stats);
}

Status Engine::generate_tokens(std::span<const int32_t> prompt, const SamplingParams& sampling, int64_t n_predict,
                               const std::function<bool(int32_t, std::string_view)>& on_token, GenerateStats* stats) {
  GenerateStats local;
  GenerateStats& st = stats != nullptr ? *stats : local;
  st = GenerateStats{};
  if (prompt.empty()) return invalid_argument("the prompt has no tokens");
  if (static_cast<int64_t>(prompt.size()) >= n_ctx()) {
    return out_of_range(fmt::format("the prompt has {} tokens but the context holds {} (raise -c)",
                                    prompt.size(), n_ctx()));
  }
  // Reuse the longest prefix already in the KV cache; the last prompt token is evaluated
  // again when the whole prompt is cached (its logits are not kept).
  const std::span<const int32_t> cached = cached_tokens();
  size_t n_keep = 0;
  while (n_keep < cached.size() && n_keep < prompt.size() && cached[n_keep] == prompt[n_keep]) ++n_keep;
  n_keep = std::min(n_keep, prompt.size() - 1);
  truncate(static_cast<int64_t>(n_keep));
  st.n_reused = static_cast<int64_t>(n_keep);
  st.n_prompt = static_cast<int64_t>(prompt.size() - n_keep);
  auto t0 = std::chrono::steady_clock::now();
  BITNET_ASSIGN_OR_RETURN(std::vector<float> logits, eval(prompt.subspan(n_keep), false));
  st.prompt_seconds = seconds_since(t0);

  std::vector<int32_t> history(prompt.begin(), prompt.end());  // for the repetition penalty
  Sampler sampler(sampling);
  t0 = std::chrono::steady_clock::now();
  st.stop_reason = "length";
  for (int64_t i = 0; i < n_predict; ++i) {
    const int32_t id = sampler.sample(logits, history);
    if (is_end_of_generation(id)) {
      st.stop_reason = "eog";
      break;
    }
    if (!on_token(id, token_to_piece(id))) {
      st.stop_reason = "stopped";
      break;
    }
    history.push_back(id);
    ++st.n_generated;
    if (i + 1 == n_predict) break;
    if (n_past() >= n_ctx()) {
      st.stop_reason = "context";
      break;
    }
    BITNET_ASSIGN_OR_RETURN(logits, eval(std::span<const int32_t>(&id, 1), false));
  }
  st.generate_seconds = seconds_since(t0);
  return {};
}

}  // namespace bitnet
