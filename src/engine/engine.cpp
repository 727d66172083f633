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

ModelSummary summarize_model(const Network& m, const hal::Backend* backend) {
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
  s.n_embd_kv = c.n_embd_kv();
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
    const uint64_t stored = backend != nullptr ? backend->weight_bytes(static_cast<hal::WeightId>(i)) : 0;
    if (!lookup_only) s.bytes_per_token += stored > 0 ? stored : w.bytes.size();
  }
  for (const auto& [name, count] : types) {
    s.weight_types += fmt::format("{}{}:{}", s.weight_types.empty() ? "" : " ", name, count);
  }
  return s;
}

Model::Model(std::shared_ptr<EngineCore> core) : core_(std::move(core)) {}
Model::~Model() = default;
Engine::Engine(std::shared_ptr<EngineCore> core, Session session) : Model(std::move(core)), session_(std::move(session)) {}
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
  BITNET_ASSIGN_OR_RETURN(const uint64_t n_bytes, requantized_bytes(head, type));
  impl.head_bytes.resize(static_cast<size_t>(n_bytes));  // on huge pages: read once per decoded token
  BITNET_RETURN_IF_ERROR(requantize_rows_into(head, type, impl.options.n_threads, impl.head_bytes));
  impl.model.replace_weight(id, type, impl.head_bytes);
  return {};
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const EngineOptions& options) {
  BITNET_ASSIGN_OR_RETURN(std::shared_ptr<EngineCore> core, load_core(options));
  return std::unique_ptr<Model>(new Model(std::move(core)));
}

Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  BITNET_ASSIGN_OR_RETURN(std::shared_ptr<EngineCore> core, load_core(options));
  BITNET_ASSIGN_OR_RETURN(const int32_t seq, core->open_sequence());
  Session session(core, seq);
  return std::unique_ptr<Engine>(new Engine(std::move(core), std::move(session)));
}

namespace {

Result<std::shared_ptr<EngineCore>> load_core_unguarded(const EngineOptions& options) {
  if (options.n_ctx < 0) return invalid_argument("context length must not be negative");
  if (options.n_batch <= 0) return invalid_argument("batch size must be positive");
  if (options.kv_block < 0 || options.kv_block > 4096 || (options.kv_block & (options.kv_block - 1)) != 0) {
    return invalid_argument(fmt::format("KV block size {} is not a power of 2 up to 4096 (0: no paging)", options.kv_block));
  }
  if (options.cache_type != "f16" && options.cache_type != "f32") {
    return invalid_argument(fmt::format("unknown KV cache type '{}' (allowed: f16, f32)", options.cache_type));
  }
  auto impl = std::make_shared<EngineCore>();
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
  if (options.kv_block > 0) {  // a pool of whole blocks
    impl->kv_block = options.kv_block;
    impl->n_ctx = (impl->n_ctx + options.kv_block - 1) / options.kv_block * options.kv_block;
    for (int64_t b = impl->n_ctx / options.kv_block - 1; b >= 0; --b) impl->free_blocks.push_back(static_cast<int32_t>(b));
    impl->block_refs.assign(static_cast<size_t>(impl->n_ctx / options.kv_block), 0);
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
  impl->summary = summarize_model(impl->model, impl->backend.get());
  return impl;
}

}  // namespace

Result<std::shared_ptr<EngineCore>> Model::load_core(const EngineOptions& options) {
  // Containers sized from the file (vocabulary, tensor tables) may still fail to grow.
  try {
    return load_core_unguarded(options);
  } catch (const std::bad_alloc&) {
    return out_of_memory(options.model_path + ": host memory allocation failed while loading");
  }
}


const ModelSummary& Model::summary() const { return core_->summary; }
std::string Model::device_summary() const {
  return fmt::format("requested={} detected=[{}] selected={}", core_->options.device,
                     fmt::join(core_->plan.detected, ","), core_->device().id);
}
std::string Model::backend_name() const { return core_->device().id; }
const DeviceDescription& Model::device() const { return core_->device(); }
// A broken engine (see EngineCore::broken) has no backend: these report that instead.
std::string Model::device_name() const {
  return core_->backend ? core_->backend->info().device : "none (" + core_->broken.message() + ")";
}
int Model::n_threads() const { return core_->backend ? core_->backend->info().n_threads : 0; }
int64_t Model::n_ctx() const { return core_->n_ctx; }
int64_t Model::kv_block() const { return core_->kv_block; }
std::string Model::kv_type() const {
  return std::string(hal::kv_type_name(core_->backend ? core_->backend->stats().kv_type : core_->kv_type));
}
std::vector<std::string> Model::kernels_used() const {
  return core_->backend ? core_->backend->kernels_used() : std::vector<std::string>{};
}
std::vector<Fallback> Model::fallbacks() const { return core_->fallbacks; }
std::vector<std::string> Model::warnings() const { return core_->warnings; }

std::vector<int32_t> Model::tokenize(std::string_view text, bool add_bos, bool parse_special) const {
  return core_->tokenizer->encode(text, add_bos, parse_special);
}
std::string Model::token_to_piece(int32_t id) const { return core_->tokenizer->token_to_piece(id); }
std::string Model::detokenize(std::span<const int32_t> ids) const { return core_->tokenizer->decode(ids); }
bool Model::add_bos_default() const { return core_->tokenizer->add_bos_default(); }
std::optional<int32_t> Model::bos_id() const { return core_->tokenizer->bos_id(); }
bool Model::is_end_of_generation(int32_t id) const { return core_->tokenizer->is_end_of_generation(id); }
int64_t Model::n_vocab() const { return core_->model.config().n_vocab; }

std::string Model::chat_template() const {
  auto t = core_->file.get_string("tokenizer.chat_template");
  return t.ok() && t->has_value() ? std::string(**t) : std::string();
}
std::string Model::bos_token() const {
  const std::optional<int32_t> id = core_->tokenizer->bos_id();
  return id ? core_->tokenizer->token_text(*id) : std::string();
}
std::string Model::eos_token() const {
  const std::optional<int32_t> id = core_->tokenizer->eos_id();
  return id ? core_->tokenizer->token_text(*id) : std::string();
}

int64_t Model::free_kv_positions() const {
  const EngineCore& c = *core_;
  if (c.kv_block > 0) return static_cast<int64_t>(c.free_blocks.size()) * c.kv_block;
  return c.n_ctx - (c.seqs.empty() ? 0 : static_cast<int64_t>(c.seqs.begin()->second.tokens.size()));
}

Result<std::vector<float>> Engine::eval(std::span<const int32_t> tokens, bool all_logits) {
  return session_.eval(tokens, all_logits);
}

Status Engine::generate(std::string_view prompt, const SamplingParams& sampling, int64_t n_predict,
                        const std::function<void(std::string_view)>& on_piece, GenerateStats* stats) {
  const std::vector<int32_t> tokens = tokenize(prompt, add_bos_default(), /*parse_special=*/true);
  if (tokens.empty()) return invalid_argument("the prompt is empty and the vocabulary has no BOS token");
  // A SentencePiece vocabulary marks word starts with a space; at the very start of the
  // text that space is not part of it (llama.cpp and run.c strip it the same way).
  bool at_text_start = prompt.empty() && core().tokenizer->kind() == TokenizerKind::kSpm;
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
  std::vector<TokenLogit> part;  // after a decode step: the part of the row the sampler asked for
  for (int64_t i = 0; i < n_predict; ++i) {
    const int32_t id = logits.empty() ? sampler.sample_top(part, history) : sampler.sample(logits, history);
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
    // Only the part of the next row that the sampler needs comes back (a GPU backend selects
    // it on the device), or the whole row.
    const std::optional<hal::TopRequest> want = sampler.wants(history);
    const StepInput in{&session_, std::span<const int32_t>(&id, 1), want ? want->k : 0,
                       want ? std::span<const int32_t>(want->also) : std::span<const int32_t>()};
    BITNET_ASSIGN_OR_RETURN(std::vector<StepOutput> out, step(std::span<const StepInput>(&in, 1)));
    logits = std::move(out[0].logits);
    part = std::move(out[0].top);
  }
  st.generate_seconds = seconds_since(t0);
  return {};
}

}  // namespace bitnet
