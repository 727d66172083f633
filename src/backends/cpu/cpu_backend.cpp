#include "backends/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bitset>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "backends/cpu/attention_split.h"
#include "backends/cpu/decode_split.h"
#include "backends/cpu/kernel_set.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/q6_K_lanes.h"
#include "backends/cpu/weights.h"
#include "core/aligned_vector.h"
#include "core/check.h"
#include "core/cpu_features.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"
#include "hal/top.h"
#include "hal/validate.h"

namespace bitnet::cpu {

namespace {

// Smallest useful piece of parallel work, in multiply-adds: below it, waking a worker costs
// more than it saves (a tiny model's decode step is faster on one thread).
constexpr int64_t kMinWorkPerChunk = 1 << 15;

// Items per chunk so that each chunk holds at least kMinWorkPerChunk of work.
int64_t min_chunk(int64_t work_per_item, int64_t floor = 1) {
  return std::max(floor, kMinWorkPerChunk / std::max<int64_t>(1, work_per_item));
}

// An rms_norm whose output the next op quantizes for a W2A8 matmul: one loop does both.
bool norm_then_quantize(const hal::Op& norm, const hal::Op& next) {
  return norm.kind == hal::OpKind::kRmsNorm && norm.n_head == 0 && next.kind == hal::OpKind::kQuantizeAct &&
         next.a == norm.dst;
}

// dst = f(a, b) over n floats: KernelSet::add, silu_mul, relu2_mul.
using ElementwiseFn = void (*)(const float* a, const float* b, int64_t n, float* dst);

bool is_elementwise(hal::OpKind kind) {
  return kind == hal::OpKind::kAdd || kind == hal::OpKind::kSiluMul || kind == hal::OpKind::kRelu2Mul;
}

// An elementwise op (the residual add, the gated activation) whose output the next op, an
// rms_norm over whole rows, reads: one loop does both, row by row (and the quantization after,
// as norm_then_quantize). On their own the two were a loop each; a decode step of 8 sequences
// ran the add (8 x 2560) and the activation (8 x 6912) on one thread, below the work that pays
// for a second, while the other waited.
bool elementwise_then_norm(const hal::Op& op, const hal::Op& norm) {
  return is_elementwise(op.kind) && norm.kind == hal::OpKind::kRmsNorm && norm.n_head == 0 && norm.a == op.dst;
}

// Matmuls run as one parallel loop at most (Q, K, V is the longest run in the op lists).
constexpr size_t kMaxFusedMatmuls = 4;

// Matmul loops of steps up to this many tokens (decode, batched decode of up to 8 sequences)
// give each thread one contiguous share sized by measured rates (CpuBackend::matmul); larger
// ones take guided chunks. 8-token steps of 2B-4T on 2 Zen 5 threads: 2.6-3.4% faster split
// than in guided chunks (both ways alternating every 2 steps in one process).
constexpr int64_t kSplitMaxTokens = 8;

// A matmul loop's work items over weight w: whole row groups of a ternary weight (so no group is
// computed twice), rows of any other.
int64_t rows_per_item(const CpuWeight& w) { return w.is_ternary() ? w.ternary.rows_per_group : 1; }
int64_t weight_items(const CpuWeight& w) { return (w.n_rows + rows_per_item(w) - 1) / rows_per_item(w); }

// DecodeSplit's key of a loop: its first weight, and whether the step has one token (streamed
// from memory) or several (compute-bound tiles), whose threads' rates differ in other ways.
size_t split_key(hal::WeightId w, int64_t n_tokens) { return static_cast<size_t>(w) * 2 + (n_tokens > 1 ? 1 : 0); }

// How many ops from ops[0] are matmuls of one input that can run as one loop: consecutive,
// writing distinct outputs none of which is that input (0 when ops[0] is no matmul).
size_t fusable_matmuls(std::span<const hal::Op> ops) {
  const auto writes_input_or_clashes = [&](size_t n) {
    if (ops[n].dst == ops[0].a) return true;
    for (size_t m = 0; m < n; ++m) {
      if (ops[m].dst == ops[n].dst) return true;
    }
    return false;
  };
  if (ops[0].kind != hal::OpKind::kMatmul) return 0;
  size_t n = 1;
  while (n < ops.size() && n < kMaxFusedMatmuls && ops[n].kind == hal::OpKind::kMatmul && ops[n].a == ops[0].a &&
         !writes_input_or_clashes(n)) {
    ++n;
  }
  return n;
}

// The kernels a backend has run, recorded per op as bits (no strings in the hot path) and
// named "<kernel>_<set>" only when asked.
class KernelsUsed {
 public:
  enum Kernel : uint8_t {
    kEmbed, kRmsNorm, kActQuant, kMatmulW2A8, kMatmulW2A8T5, kMatmulQ6_KLanes, kScale, kRopeNorm, kRopeNeox,
    kAttention, kAttentionF16, kSiluMul, kRelu2Mul, kAdd, kCount
  };

  void add(Kernel k) { kernels_.set(k); }
  void add_float_matmul(GgmlType type) {
    BITNET_CHECK(static_cast<size_t>(type) < kMaxTypes);  // loaded weights have known type ids
    float_types_.set(static_cast<size_t>(type));
  }

  std::vector<std::string> names(std::string_view set) const {
    static constexpr std::string_view kNames[kCount] = {
        "embed", "rms_norm", "act_quant_i8", "matmul_w2a8", "matmul_w2a8_t5", "matmul_q6_K_lanes", "scale", "rope_norm",
        "rope_neox", "attention_f32", "attention_f16", "silu_mul", "relu2_mul", "add"};
    std::vector<std::string> out;
    for (size_t k = 0; k < kCount; ++k) {
      if (kernels_.test(k)) out.push_back(fmt::format("{}_{}", kNames[k], set));
    }
    for (size_t t = 0; t < kMaxTypes; ++t) {
      if (float_types_.test(t)) out.push_back(fmt::format("matmul_{}_{}", ggml_type_name(static_cast<GgmlType>(t)), set));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  static constexpr size_t kMaxTypes = 64;  // GGML type ids are below 40
  std::bitset<kCount> kernels_;
  std::bitset<kMaxTypes> float_types_;
};

// Zeroed elements of T (float, or uint16_t for halves) from allocate_zeroed: large blocks come
// as fresh zero pages (huge ones where the kernel gives them) mapped on first touch, so a KV
// cache for a long context costs no time until positions are written.
class ZeroedBytes {
 public:
  ZeroedBytes() = default;
  ZeroedBytes(const ZeroedBytes&) = delete;
  ZeroedBytes& operator=(const ZeroedBytes&) = delete;
  ~ZeroedBytes() { free_zeroed(data_, n_bytes_); }
  // False when the memory cannot be had. Large blocks are on huge pages (allocate_zeroed).
  bool reset(size_t n_bytes) {
    free_zeroed(data_, n_bytes_);
    data_ = static_cast<uint8_t*>(allocate_zeroed(n_bytes));
    n_bytes_ = data_ != nullptr ? n_bytes : 0;
    return data_ != nullptr || n_bytes == 0;
  }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }
  size_t n_bytes() const { return n_bytes_; }

 private:
  uint8_t* data_ = nullptr;
  size_t n_bytes_ = 0;
};

// One activation buffer: F32 rows, or Q8 rows with their scales and group sums.
struct ActBuffer {
  std::vector<float> f32;
  Q8Buffer q8;
  // The F32 rows quantized for quantized-activation matmuls (kernels.h QuantActFormat), one
  // buffer per activation type (Q8_0, Q8_1, Q8_K, Q8_K in lane order for lane-order Q6_K
  // weights), written once per matmul op that reads them.
  std::array<std::vector<uint8_t>, 4> qact;
};

// The slot of ActBuffer::qact for an activation type, in lane order or not.
size_t qact_slot(GgmlType act_type, bool lanes) {
  return lanes ? 3 : act_type == GgmlType::kQ8_0 ? 0 : act_type == GgmlType::kQ8_1 ? 1 : 2;
}

class CpuBackend final : public hal::Backend {
 public:
  CpuBackend(int n_threads, Result<const KernelSet*> kernels)
      : pool_(n_threads),
        kernels_(kernels.ok() ? *kernels : &kScalarKernels),
        init_status_(kernels.status()),
        split_(pool_.n_threads()),
        cuts_(static_cast<size_t>(pool_.n_threads()) + 1),
        next_cuts_(cuts_.size()),
        busy_ns_(static_cast<size_t>(pool_.n_threads())),
        done_items_(static_cast<size_t>(pool_.n_threads())),
        wait_prefetch_(static_cast<size_t>(pool_.n_threads())) {}

  hal::BackendInfo info() const override {
    return {fmt::format("cpu-{}", kernels_->name), "host CPU", pool_.n_threads()};
  }

  Status load_weights(std::span<const hal::WeightDesc> weights) override {
    BITNET_RETURN_IF_ERROR(init_status_);
    weights_.clear();
    weights_.reserve(weights.size());
    weight_bytes_ = 0;
    const TernaryLayout layout = kernels_->ternary_layout_for_threads != nullptr
                                     ? kernels_->ternary_layout_for_threads(pool_.n_threads())
                                     : kernels_->ternary_layout;
    for (const hal::WeightDesc& d : weights) {
      BITNET_ASSIGN_OR_RETURN(CpuWeight w, prepare_weight(d, kernels_->ternary_rows_per_group, &pool_, layout,
                                                          kernels_->q6_K_lanes_dot != nullptr));
      weight_bytes_ += w.resident_bytes() + (w.owned.empty() ? w.raw.size() : 0);
      weights_.push_back(std::move(w));
    }
    shapes_ = hal::weight_shapes(weights);
    return {};
  }

  Status init_kv(const hal::KvShape& shape) override {
    kv_ = {};  // set only once the cache exists: compute() refuses to run before
    const size_t n_bytes = static_cast<size_t>(shape.n_layer) * static_cast<size_t>(shape.n_ctx) *
                           static_cast<size_t>(shape.n_embd_kv) * hal::kv_type_bytes(shape.type);
    // Attention scores: kMaxGroupHeads rows of n_ctx per thread slot (attention_heads).
    const size_t n_scores = static_cast<size_t>(pool_.n_threads()) * kMaxGroupHeads * static_cast<size_t>(shape.n_ctx);
    if (!k_cache_.reset(n_bytes) || !v_cache_.reset(n_bytes) || !scores_.reset(n_scores * sizeof(float))) {
      k_cache_.reset(0);
      v_cache_.reset(0);
      return out_of_memory(fmt::format("KV cache of {} MiB", 2 * n_bytes >> 20));
    }
    kv_ = shape;
    return {};
  }

  Status compute(const hal::Graph& graph, std::span<const int32_t> tokens,
                 std::span<float> logits) override;
  // Selects from the logits where the graph left them (no copy of the rows, one row per item
  // of a parallel loop): a step of 8 sequences of a 128K vocabulary had copied 4 MB into a
  // fresh buffer, page faults and all, and scanned the rows on one thread.
  Status compute_top(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<const hal::TopRequest> req,
                     std::vector<std::vector<hal::TokenLogit>>& out) override;

  std::vector<std::string> kernels_used() const override { return kernels_used_.names(kernels_->name); }

  uint64_t weight_bytes(hal::WeightId id) const override {
    if (id < 0 || static_cast<size_t>(id) >= weights_.size()) return 0;
    return weight(id).read_bytes();
  }

  hal::BackendStats stats() const override {
    hal::BackendStats s;
    s.weight_bytes = weight_bytes_;
    s.kv_bytes = k_cache_.n_bytes() + v_cache_.n_bytes();
    s.kv_type = kv_.type;
    return s;
  }

 private:
  const CpuWeight& weight(hal::WeightId id) const { return weights_[static_cast<size_t>(id)]; }
  float* f32(hal::ActId id) { return acts_[static_cast<size_t>(id)].f32.data(); }
  void prepare_acts(const hal::Graph& graph);
  // compute() but the copy of the logits: they stay in acts_[graph.logits].
  Status run_graph(const hal::Graph& graph, std::span<const int32_t> tokens);
  Status run_op(const hal::Graph& graph, const hal::Op& op, std::span<const int32_t> tokens);
  // The norm op over d's rows; with `quantize` (the next op, quantizing this output) each row
  // quantized right after its norm, and with `pre` (the op before, writing the norm's input)
  // each row of that elementwise op computed just before.
  void rms_norm(const hal::ActDesc& d, const hal::Op& op, const hal::Op* quantize = nullptr, const hal::Op* pre = nullptr);
  void quantize(const hal::ActDesc& d, const hal::Op& op);
  void rope(const hal::Graph& graph, const hal::ActDesc& d, const hal::Op& op);
  void elementwise(const hal::ActDesc& d, const hal::Op& op);
  // The kernel and receipt entry of an elementwise op (kAdd, kSiluMul, kRelu2Mul).
  ElementwiseFn elementwise_fn(hal::OpKind kind);
  // Matmuls reading one input (Q/K/V, gate/up) as one parallel loop over all their rows: one
  // barrier instead of one per matmul, and the input read once per chunk of rows.
  // `next` is the step's next matmul loop (after the last, the first: the next step's), whose
  // shares the threads prefetch while they wait in a step of up to kSplitMaxTokens tokens.
  void matmul(const hal::Graph& graph, std::span<const hal::Op> ops, std::span<const hal::Op> next = {});
  // The items of a matmul loop over ops' weights (weight_items).
  int64_t matmul_items(std::span<const hal::Op> ops) const;
  // What thread s prefetches while it waits: the start of its share of loop `next`, a loop
  // over n_tokens rows.
  void set_wait_prefetch(std::span<const hal::Op> next, int64_t n_tokens);
  const int8_t* order_ternary_act(const Q8Rows& x);
  const uint8_t* quantize_for_dot(ActBuffer& x, const QuantActFormat& f, int64_t n_tokens, int64_t n_cols,
                                  const uint8_t* prev_act, bool q6_K_lanes);
  void attention(const hal::Graph& graph, const hal::Op& op);
  // Where layer il's cache starts (an element index, F32 or F16 elements); in it, kv head h's
  // rows (of head_dim elements, one per cache row) start at h * n_ctx * head_dim (kv_head_offset).
  int64_t kv_layer(int32_t il) const { return static_cast<int64_t>(il) * kv_.n_ctx * kv_.n_embd_kv; }
  int64_t kv_head_offset(int64_t h, int32_t head_dim) const { return h * kv_.n_ctx * head_dim; }
  void store_kv(const hal::Graph& graph, const hal::Op& op);

  ThreadPool pool_;
  const KernelSet* kernels_;
  Status init_status_;  // a kernel set that could not be chosen: load_weights reports it
  std::vector<CpuWeight> weights_;
  uint64_t weight_bytes_ = 0;
  std::vector<hal::WeightShape> shapes_;  // for hal::validate_graph
  hal::KvShape kv_;
  hal::KvRows kv_rows_;  // the step's KV addressing (hal::resolve_kv)
  // [n_layer][n_head_kv][n_ctx][head_dim] of kv_.type (float or IEEE half): a decode token's
  // attention reads each kv head's rows as one contiguous run per layer, which the hardware
  // prefetchers follow. Rows of all heads side by side ([n_ctx][n_embd_kv]) left a head's rows
  // 256 bytes in every 1280 (2B-4T), a pattern they do not follow: 2 Zen 5 threads read a
  // layer's 4096-position cache at 14 GB/s, head-major at 37 (bench_cpu_kernels
  // attention_streamed_f16).
  ZeroedBytes k_cache_;
  ZeroedBytes v_cache_;
  ZeroedBytes scores_;   // [n_threads][kMaxGroupHeads][n_ctx] floats
  AttentionSplit attention_split_;  // attention's work items, long contexts in parts
  std::vector<ActBuffer> acts_;
  AlignedVector<int8_t> ordered_act_;  // a matmul's Q8 input in its kernels' column order
  // The step's rope angles, [n_tokens][n_rot] (n_rot / 2 cosines, then the sines), computed by
  // its first rope op for the q and k of every layer; recomputed each step (run_graph).
  std::vector<float> rope_angles_;
  bool rope_ready_ = false;
  KernelsUsed kernels_used_;
  std::vector<std::pair<size_t, size_t>> matmul_loops_;  // the step's matmul loops: first op, count
  DecodeSplit split_;                                    // matmul shares of small steps (split_key)
  std::vector<int64_t> cuts_, next_cuts_, busy_ns_;      // a split loop's shares and times, the next's shares
  std::vector<int64_t> done_items_;                      // the items each thread ran of a split loop
  std::vector<ThreadPool::Prefetch> wait_prefetch_;      // per thread: its share of the next loop
};

void CpuBackend::prepare_acts(const hal::Graph& graph) {
  acts_.resize(graph.acts.size());
  for (size_t i = 0; i < graph.acts.size(); ++i) {
    const hal::ActDesc& d = graph.acts[i];
    if (d.type == hal::ActType::kF32) {
      acts_[i].f32.resize(static_cast<size_t>(d.n_rows * d.n_cols));
    } else {
      acts_[i].q8.resize(d.n_rows, d.n_cols);
    }
  }
}

Status CpuBackend::compute(const hal::Graph& graph, std::span<const int32_t> tokens,
                           std::span<float> logits) {
  BITNET_RETURN_IF_ERROR(hal::validate_graph(graph, tokens, logits.size(), shapes_, kv_));
  BITNET_RETURN_IF_ERROR(run_graph(graph, tokens));
  const std::vector<float>& out = acts_[static_cast<size_t>(graph.logits)].f32;
  std::copy(out.begin(), out.end(), logits.begin());
  return {};
}

Status CpuBackend::compute_top(const hal::Graph& graph, std::span<const int32_t> tokens,
                               std::span<const hal::TopRequest> req, std::vector<std::vector<hal::TokenLogit>>& out) {
  BITNET_ASSIGN_OR_RETURN(const hal::ActDesc* a, hal::top_logits(graph, req.size()));
  BITNET_RETURN_IF_ERROR(hal::validate_graph(graph, tokens, static_cast<size_t>(a->n_rows * a->n_cols), shapes_, kv_));
  BITNET_RETURN_IF_ERROR(run_graph(graph, tokens));
  const std::span<const float> logits = acts_[static_cast<size_t>(graph.logits)].f32;
  out.resize(req.size());
  pool_.parallel_for(static_cast<int64_t>(req.size()), min_chunk(a->n_cols / 8), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      hal::select_top(logits.subspan(static_cast<size_t>(r * a->n_cols), static_cast<size_t>(a->n_cols)),
                      req[static_cast<size_t>(r)], out[static_cast<size_t>(r)]);
    }
  });
  return {};
}

Status CpuBackend::run_graph(const hal::Graph& graph, std::span<const int32_t> tokens) {
  kv_rows_ = hal::resolve_kv(graph, kv_);
  prepare_acts(graph);
  rope_ready_ = false;
  const std::span<const hal::Op> ops = graph.ops;
  matmul_loops_.clear();
  for (size_t i = 0; i < ops.size();) {
    const size_t n = fusable_matmuls(ops.subspan(i));
    if (n > 0) matmul_loops_.emplace_back(i, n);
    i += std::max<size_t>(n, 1);
  }
  size_t loop = 0;
  for (size_t i = 0; i < ops.size();) {
    if (loop < matmul_loops_.size() && matmul_loops_[loop].first == i) {
      const auto [next_i, next_n] = matmul_loops_[(loop + 1) % matmul_loops_.size()];
      const size_t n = matmul_loops_[loop++].second;
      matmul(graph, ops.subspan(i, n), ops.subspan(next_i, next_n));
      i += n;
    } else if (i + 1 < ops.size() && elementwise_then_norm(ops[i], ops[i + 1])) {
      const bool quantize = i + 2 < ops.size() && norm_then_quantize(ops[i + 1], ops[i + 2]);
      rms_norm(graph.acts[static_cast<size_t>(ops[i + 1].dst)], ops[i + 1], quantize ? &ops[i + 2] : nullptr, &ops[i]);
      i += quantize ? 3 : 2;
    } else if (i + 1 < ops.size() && norm_then_quantize(ops[i], ops[i + 1])) {
      rms_norm(graph.acts[static_cast<size_t>(ops[i].dst)], ops[i], &ops[i + 1]);
      i += 2;
    } else {
      BITNET_RETURN_IF_ERROR(run_op(graph, ops[i], tokens));
      ++i;
    }
  }
  return {};
}

Status CpuBackend::run_op(const hal::Graph& graph, const hal::Op& op, std::span<const int32_t> tokens) {
  const auto desc = [&](hal::ActId id) -> const hal::ActDesc& { return graph.acts[static_cast<size_t>(id)]; };
  switch (op.kind) {
    case hal::OpKind::kEmbed: {
      const CpuWeight& w = weight(op.w);  // token ids were checked by hal::validate_graph
      for (int64_t t = 0; t < graph.n_tokens; ++t) dequantize_row(w, tokens[static_cast<size_t>(t)], f32(op.dst) + t * w.n_cols);
      kernels_used_.add(KernelsUsed::kEmbed);
      return {};
    }
    case hal::OpKind::kRmsNorm:
      rms_norm(desc(op.dst), op);
      return {};
    case hal::OpKind::kQuantizeAct:
      quantize(desc(op.dst), op);
      return {};
    case hal::OpKind::kMatmul:
      matmul(graph, {&op, 1});
      return {};
    case hal::OpKind::kScale: {
      const hal::ActDesc& d = desc(op.dst);
      const float s = weight(op.w).values[0];
      float* y = f32(op.dst);
      for (int64_t i = 0; i < d.n_rows * d.n_cols; ++i) y[i] *= s;
      kernels_used_.add(KernelsUsed::kScale);
      return {};
    }
    case hal::OpKind::kBias: {
      const hal::ActDesc& d = desc(op.dst);
      const float* b = weight(op.w).values.data();
      float* y = f32(op.dst);
      for (int64_t t = 0; t < d.n_rows; ++t) kernels_->add(y + t * d.n_cols, b, d.n_cols, y + t * d.n_cols);
      kernels_used_.add(KernelsUsed::kAdd);
      return {};
    }
    case hal::OpKind::kRope:
      rope(graph, desc(op.dst), op);
      return {};
    case hal::OpKind::kStoreKv:
      store_kv(graph, op);
      return {};
    case hal::OpKind::kAttention:
      attention(graph, op);
      return {};
    case hal::OpKind::kSiluMul:
    case hal::OpKind::kRelu2Mul:
    case hal::OpKind::kAdd:
      elementwise(desc(op.dst), op);
      return {};
    case hal::OpKind::kGetRows: {
      const hal::ActDesc& d = desc(op.dst);
      for (int64_t i = 0; i < d.n_rows; ++i) {
        std::memcpy(f32(op.dst) + i * d.n_cols, f32(op.a) + graph.get_rows[static_cast<size_t>(i)] * d.n_cols,
                    static_cast<size_t>(d.n_cols) * sizeof(float));
      }
      return {};
    }
    case hal::OpKind::kCopyRows: {
      const hal::ActDesc& d = desc(op.dst);
      std::memcpy(f32(op.dst), f32(op.a) + op.row0 * d.n_cols, static_cast<size_t>(d.n_rows * d.n_cols) * sizeof(float));
      return {};
    }
  }
  return internal_error("unknown op");
}

void CpuBackend::rms_norm(const hal::ActDesc& d, const hal::Op& op, const hal::Op* quantize, const hal::Op* pre) {
  const float* g = weight(op.w).values.data();
  const float* x = f32(op.a);
  float* y = f32(op.dst);
  Q8Buffer* q = quantize != nullptr ? &acts_[static_cast<size_t>(quantize->dst)].q8 : nullptr;
  if (op.n_head > 0) {  // each head slice on its own: the rows are contiguous slices
    BITNET_CHECK(q == nullptr && pre == nullptr);
    const int64_t n = d.n_cols / op.n_head;
    pool_.parallel_for(d.n_rows * op.n_head, min_chunk(n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) kernels_->rms_norm_row(x + r * n, g, n, op.eps, y + r * n);
    });
    kernels_used_.add(KernelsUsed::kRmsNorm);
    return;
  }
  // Work per column: the norm's two passes, and the quantizer's absmax, scale and rounding
  // passes when fused: 8 rows of 2560 columns (a decode step of 8 sequences) are worth both
  // threads.
  const ElementwiseFn pre_fn = pre != nullptr ? elementwise_fn(pre->kind) : nullptr;
  const float* pre_a = pre != nullptr ? f32(pre->a) : nullptr;
  const float* pre_b = pre != nullptr ? f32(pre->b) : nullptr;
  float* pre_y = pre != nullptr ? f32(pre->dst) : nullptr;
  const int64_t pre_work = pre == nullptr ? 0 : pre->kind == hal::OpKind::kSiluMul ? 4 : 1;  // as elementwise()
  pool_.parallel_for(d.n_rows, min_chunk(d.n_cols * ((q != nullptr ? 4 : 2) + pre_work)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (pre_fn != nullptr) pre_fn(pre_a + r * d.n_cols, pre_b + r * d.n_cols, d.n_cols, pre_y + r * d.n_cols);
      kernels_->rms_norm_row(x + r * d.n_cols, g, d.n_cols, op.eps, y + r * d.n_cols);
      if (q != nullptr) q->quantize(*kernels_, r, y + r * d.n_cols);  // while the row is in L1
    }
  });
  kernels_used_.add(KernelsUsed::kRmsNorm);
  if (q != nullptr) kernels_used_.add(KernelsUsed::kActQuant);
}

void CpuBackend::quantize(const hal::ActDesc& d, const hal::Op& op) {
  const float* x = f32(op.a);
  Q8Buffer& q = acts_[static_cast<size_t>(op.dst)].q8;
  pool_.parallel_for(d.n_rows, min_chunk(d.n_cols), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) q.quantize(*kernels_, t, x + t * d.n_cols);
  });
  kernels_used_.add(KernelsUsed::kActQuant);
}

void CpuBackend::rope(const hal::Graph& graph, const hal::ActDesc& d, const hal::Op& op) {
  float* x = f32(op.dst);
  const hal::RopeParams& p = graph.rope;
  const int64_t n_rot = p.n_rot;
  if (!rope_ready_) {
    // The sines and cosines, some 30 instructions each, were rope's cost when every rope op (the
    // q and k of each layer: 60 per step of 2B-4T) computed them again.
    rope_angles_.resize(static_cast<size_t>(graph.n_tokens * n_rot));
    pool_.parallel_for(graph.n_tokens, min_chunk(n_rot * 16), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* a = rope_angles_.data() + t * n_rot;
        rope_angles(graph.position(t), p, a, a + n_rot / 2);
      }
    });
    rope_ready_ = true;
  }
  // Row t is token t (hal::validate_graph checks that rope's rows are the step's tokens).
  pool_.parallel_for(d.n_rows, min_chunk(op.n_head * n_rot * 2), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* a = rope_angles_.data() + t * n_rot;
      rope_row_angles(x + t * d.n_cols, op.n_head, graph.attn.head_dim, a, a + n_rot / 2, p);
    }
  });
  kernels_used_.add(graph.rope.style == hal::RopeStyle::kNeox ? KernelsUsed::kRopeNeox : KernelsUsed::kRopeNorm);
}

ElementwiseFn CpuBackend::elementwise_fn(hal::OpKind kind) {
  kernels_used_.add(kind == hal::OpKind::kSiluMul    ? KernelsUsed::kSiluMul
                    : kind == hal::OpKind::kRelu2Mul ? KernelsUsed::kRelu2Mul
                                                     : KernelsUsed::kAdd);
  return kind == hal::OpKind::kSiluMul ? kernels_->silu_mul : kind == hal::OpKind::kRelu2Mul ? kernels_->relu2_mul : kernels_->add;
}

void CpuBackend::elementwise(const hal::ActDesc& d, const hal::Op& op) {
  const float* a = f32(op.a);
  const float* b = f32(op.b);
  float* y = f32(op.dst);
  const ElementwiseFn fn = elementwise_fn(op.kind);
  // Work per element: silu's exp and divide are some 30 vector ops per 8 elements, so a
  // decode step of 8 sequences (8 x 6912 elements) is worth both threads; an add is not.
  const int64_t work = op.kind == hal::OpKind::kSiluMul ? 4 : 1;
  pool_.parallel_for(d.n_rows * d.n_cols, min_chunk(work), [&](int64_t i0, int64_t i1) { fn(a + i0, b + i0, i1 - i0, y + i0); });
}

// x's F32 rows quantized to f (parallel over tokens) for a matmul of n_cols columns, unless
// prev_act, the previous part of the same fused matmul, is that buffer already.
const uint8_t* CpuBackend::quantize_for_dot(ActBuffer& x, const QuantActFormat& f, int64_t n_tokens,
                                            int64_t n_cols, const uint8_t* prev_act, bool q6_K_lanes) {
  std::vector<uint8_t>& buf = x.qact[qact_slot(f.type, q6_K_lanes)];
  if (prev_act != nullptr && prev_act == buf.data()) return buf.data();
  const int64_t row_bytes = f.row_bytes(n_cols);
  if (buf.size() < static_cast<size_t>(n_tokens * row_bytes)) buf.resize(static_cast<size_t>(n_tokens * row_bytes));
  const float* src = x.f32.data();
  uint8_t* dst = buf.data();
  pool_.parallel_for(n_tokens, min_chunk(n_cols), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      if (kernels_->quantize_act_row == nullptr ||
          !kernels_->quantize_act_row(f.type, src + t * n_cols, n_cols, dst + t * row_bytes)) {
        f.quantize_row(src + t * n_cols, n_cols, dst + t * row_bytes);
      }
      if (q6_K_lanes) {
        for (int64_t b = 0; b < n_cols / f.block; ++b) q8_K_block_to_lanes(dst + t * row_bytes + b * f.bytes);
      }
    }
  });
  return buf.data();
}

// x's rows in the column order of the kernel set's ternary layout, once for all the threads
// and row chunks of a matmul.
const int8_t* CpuBackend::order_ternary_act(const Q8Rows& x) {
  ordered_act_.resize(static_cast<size_t>(x.n_tokens * x.n_cols));
  int8_t* out = ordered_act_.data();
  pool_.parallel_for(x.n_tokens, min_chunk(x.n_cols), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) kernels_->order_ternary_act(x.q + t * x.n_cols, x.n_cols, out + t * x.n_cols);
  });
  return out;
}

int64_t CpuBackend::matmul_items(std::span<const hal::Op> ops) const {
  int64_t n = 0;
  for (const hal::Op& op : ops) n += weight_items(weight(op.w));
  return n;
}

// How much of its next share a waiting thread prefetches: well inside any L2 (512 KB on Zen 3,
// 1-2 MB elsewhere), which the loop it waits on also streams through.
constexpr int64_t kWaitPrefetchBytes = 256 << 10;

// The grain of a split loop (ThreadPool::parallel_split): about this many bytes of weights, in
// a multiple of kSplitGrainItems items (4 T5 row groups make one pass of t5_gemv_rows). On two
// Zen 4 threads the shares' ends were 5% of a decode token's time apart (the head's 8.5 ms loop
// 0.37 ms of it); taking each other's ends in grains of 1 MB made 2B-4T decode take 0.967-1.000
// of the time (256 KB: 0.993-1.010), and 0.988 with another process busy on one of the cores.
// A share is taken from only while two grains are left in it: on two threads, of 2B-4T's loops
// only the head's and gate/up's (7 MB) shares are that large.
constexpr int64_t kSplitGrainBytes = 1 << 20;
constexpr int64_t kSplitGrainItems = 4;

void CpuBackend::set_wait_prefetch(std::span<const hal::Op> next, int64_t n_tokens) {
  const int64_t n_items = matmul_items(next);
  split_.cuts(split_key(next[0].w, n_tokens), n_items, next_cuts_);
  for (size_t s = 0; s < wait_prefetch_.size(); ++s) {
    wait_prefetch_[s] = {};
    int64_t item = next_cuts_[s];
    if (item >= next_cuts_[s + 1]) continue;
    for (const hal::Op& op : next) {
      const CpuWeight& w = weight(op.w);
      const int64_t items = weight_items(w);
      if (item >= items) {
        item -= items;
        continue;
      }
      const std::span<const uint8_t> bytes = w.is_ternary() ? std::span<const uint8_t>(w.ternary.packed) : w.raw;
      const int64_t item_bytes = static_cast<int64_t>(bytes.size()) / items;
      const int64_t left = static_cast<int64_t>(bytes.size()) - item * item_bytes;
      wait_prefetch_[s] = {bytes.data() + item * item_bytes, std::min(left, kWaitPrefetchBytes)};
      break;
    }
  }
}

void CpuBackend::matmul(const hal::Graph& graph, std::span<const hal::Op> ops, std::span<const hal::Op> next) {
  const hal::ActDesc& src = graph.acts[static_cast<size_t>(ops[0].a)];
  ActBuffer& x = acts_[static_cast<size_t>(ops[0].a)];
  const int64_t n_tokens = src.n_rows;
  const bool q8 = src.type == hal::ActType::kQ8;
  // Work items as weight_items; item `first` is where each matmul's items start.
  struct Part {
    const CpuWeight* w;
    float* y;
    int64_t first;
    int64_t rows_per_item;
    QuantDotFn dot;              // set for weights dotted against quantized activations
    QuantTileFn tile;            // and the set's prefill tile for them, if it has one
    const uint8_t* act;          // those activations: n_tokens rows of act_row_bytes
    int64_t act_row_bytes;
  };
  BITNET_CHECK(!ops.empty() && ops.size() <= kMaxFusedMatmuls);
  std::array<Part, kMaxFusedMatmuls> parts_buf;
  const std::span<Part> parts(parts_buf.data(), ops.size());
  int64_t n_items = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const CpuWeight& w = weight(ops[i].w);
    BITNET_CHECK(w.is_ternary() == q8);
    parts[i] = {&w, f32(ops[i].dst), n_items, rows_per_item(w), nullptr, nullptr, nullptr, 0};
    n_items += weight_items(w);
    if (!q8) {
      if (const std::optional<QuantActFormat> f = quant_act_format(w.type); f && w.n_cols % f->block == 0) {
        if (w.q6_K_lanes) {
          parts[i].dot = kernels_->q6_K_lanes_dot();
          parts[i].tile = kernels_->q6_K_lanes_tile != nullptr ? kernels_->q6_K_lanes_tile() : nullptr;
        } else {
          parts[i].dot = kernels_->quant_dot(w.type);
          parts[i].tile = kernels_->quant_tile != nullptr ? kernels_->quant_tile(w.type) : nullptr;
        }
        parts[i].act_row_bytes = f->row_bytes(w.n_cols);
        // Fused parts share x: quantized once if they share the format and order too (and so
        // the width).
        parts[i].act = quantize_for_dot(x, *f, n_tokens, w.n_cols, i > 0 ? parts[i - 1].act : nullptr, w.q6_K_lanes);
      }
    }
  }
  const CpuWeight& w0 = *parts[0].w;
  int64_t chunk = q8 ? min_chunk(parts[0].rows_per_item * w0.n_cols * n_tokens, 4) : min_chunk(w0.n_cols * n_tokens, 16);
  // Decode streams the weights from memory once: each thread takes one contiguous share, one
  // stream for the prefetchers (parallel_split below). Guided chunks (a dozen per loop) each
  // start a stream that pays demand misses before the prefetch runs ahead: 2B-4T decode 4-9%
  // slower on Zen 5 with 2 threads. Steps of a few tokens (kSplitMaxTokens) take shares too,
  // prefill the guided chunks. A loop of less than two chunks' work runs on one thread.
  if (n_tokens == 1) chunk = std::max(chunk, n_items / pool_.n_threads());
  Q8Rows q = q8 ? x.q8.rows() : Q8Rows{};
  if (q8 && kernels_->order_ternary_act != nullptr &&
      std::any_of(parts.begin(), parts.end(), [](const Part& p) { return p.w->ternary.layout == TernaryLayout::k5Trit; })) {
    q.q_ordered = order_ternary_act(q);
  }
  const auto run = [&](int64_t i0, int64_t i1) {
    for (const Part& p : parts) {
      const int64_t p_items = weight_items(*p.w);
      const int64_t b = std::max(i0, p.first) - p.first;
      const int64_t e = std::min(i1, p.first + p_items) - p.first;
      if (b >= e) continue;
      const int64_t r0 = b * p.rows_per_item;
      const int64_t r1 = std::min(p.w->n_rows, e * p.rows_per_item);
      if (q8) {
        kernels_->matmul_ternary(*p.w, q, p.y, r0, r1);
      } else if (p.dot != nullptr) {
        matmul_quant_rows(*p.w, p.act, p.act_row_bytes, n_tokens, p.y, r0, r1, p.dot, p.tile);
      } else {
        kernels_->matmul_float(*p.w, x.f32.data(), n_tokens, p.y, r0, r1);
      }
    }
  };
  if (n_tokens <= kSplitMaxTokens && pool_.n_threads() > 1 && n_items >= 2 * chunk) {
    // One contiguous share per thread, sized by the threads' rates on this loop in earlier
    // steps (DecodeSplit), run in grains of about kSplitGrainBytes so that a thread done early
    // takes over the end of a slower one's share; a thread done prefetches the start of its
    // share of the next loop while it waits (for the others, or through the ops between).
    const size_t key = split_key(ops[0].w, n_tokens);
    split_.cuts(key, n_items, cuts_);
    if (!next.empty()) set_wait_prefetch(next, graph.acts[static_cast<size_t>(next[0].a)].n_rows);
    int64_t weight_bytes = 0;
    for (const Part& p : parts) weight_bytes += static_cast<int64_t>(p.w->read_bytes());
    const int64_t grain = std::max<int64_t>(kSplitGrainItems, kSplitGrainBytes * n_items / std::max<int64_t>(1, weight_bytes) /
                                                                  kSplitGrainItems * kSplitGrainItems);
    pool_.parallel_split(cuts_, [&](int, int64_t i0, int64_t i1) { run(i0, i1); },
                         next.empty() ? std::span<const ThreadPool::Prefetch>{} : wait_prefetch_, busy_ns_, grain, done_items_);
    split_.record(key, done_items_, busy_ns_);
  } else {
    pool_.parallel_for(n_items, chunk, run);
  }
  for (const Part& p : parts) {
    if (q8) {
      // T5: the weight's 1.6-bit layout (weights.h), which the receipt names.
      kernels_used_.add(p.w->ternary.layout == TernaryLayout::k5Trit ? KernelsUsed::kMatmulW2A8T5
                                                                    : KernelsUsed::kMatmulW2A8);
    } else if (p.w->q6_K_lanes) {
      kernels_used_.add(KernelsUsed::kMatmulQ6_KLanes);
    } else {
      kernels_used_.add_float_matmul(p.w->type);
    }
  }
}

// K and V rows of the step's tokens into the cache rows of their positions: copied (F32) or
// rounded to nearest even (F16).
void CpuBackend::store_kv(const hal::Graph& graph, const hal::Op& op) {
  const hal::ActDesc& k = graph.acts[static_cast<size_t>(op.a)];
  const bool f16 = kv_.type == hal::KvType::kF16;
  // Work per element: the F16 rounding, some 10 instructions where it is scalar (a decode step of
  // 8 sequences spent ~1.5% of its time here on one thread); a copy is 1.
  const auto to_f16 = kernels_->fp32_to_fp16_row != nullptr ? kernels_->fp32_to_fp16_row : fp32_to_fp16_row;
  const int32_t head_dim = graph.attn.head_dim;
  BITNET_CHECK(head_dim > 0 && k.n_cols == kv_.n_embd_kv && k.n_cols % head_dim == 0);
  const int64_t layer = kv_layer(op.il);
  pool_.parallel_for(k.n_rows, min_chunk(k.n_cols * (f16 ? 16 : 1)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t row = kv_rows_.row(t, kv_rows_.pos[static_cast<size_t>(t)]);
      for (int64_t h = 0; h < k.n_cols / head_dim; ++h) {
        const int64_t i = layer + kv_head_offset(h, head_dim) + row * head_dim;
        const float* k_row = f32(op.a) + t * k.n_cols + h * head_dim;
        const float* v_row = f32(op.b) + t * k.n_cols + h * head_dim;
        if (f16) {
          to_f16(k_row, head_dim, k_cache_.as<uint16_t>() + i);
          to_f16(v_row, head_dim, v_cache_.as<uint16_t>() + i);
        } else {
          std::memcpy(k_cache_.as<float>() + i, k_row, static_cast<size_t>(head_dim) * sizeof(float));
          std::memcpy(v_cache_.as<float>() + i, v_row, static_cast<size_t>(head_dim) * sizeof(float));
        }
      }
    }
  });
}

// Query heads per attention work item: the kv group (at most kMaxGroupHeads), halved while that
// leaves fewer than 4 items per thread (one decode token of 2B-4T: 20 heads in 5 groups of 4, on
// 2 threads: pairs, 10 items) and the halves still divide it.
int32_t group_heads(int32_t group, int64_t head_items, int n_threads) {
  int32_t heads = group;
  while (heads > 1 && (heads > kMaxGroupHeads || (heads % 2 == 0 && head_items / heads < 4 * int64_t{n_threads}))) {
    if (heads % 2 != 0) return 1;
    heads /= 2;
  }
  return heads;
}

void CpuBackend::attention(const hal::Graph& graph, const hal::Op& op) {
  const hal::AttentionParams& p = graph.attn;
  const float* q = f32(op.a);
  float* out = f32(op.dst);
  const int64_t n_embd = static_cast<int64_t>(p.n_head) * p.head_dim;
  const int32_t group = p.n_head / p.n_head_kv;  // query heads per kv head (GQA)
  const int64_t layer = kv_layer(op.il);
  const bool f16 = kv_.type == hal::KvType::kF16;
  int64_t max_pos = 0;
  for (int32_t pos : kv_rows_.pos) max_pos = std::max<int64_t>(max_pos, pos);
  const int64_t work = (max_pos + 1) * p.head_dim * 2;  // per (token, head), at most
  // The identity map (one sequence in rows 0..) reads rows directly; a paged one through its table.
  const bool paged = !graph.kv.pos.empty();
  int32_t shift = 0;
  while ((int64_t{1} << shift) < kv_rows_.block_size) ++shift;
  // Work items of `heads` query heads of one kv head, for each part of each token's positions
  // (AttentionSplit: one part unless the context is long): all of the group where that leaves
  // enough items for the threads, so that the set's attention_heads reads the group's cache
  // rows once.
  const bool grouped = f16 ? kernels_->attention_heads_f16 != nullptr : kernels_->attention_heads != nullptr;
  const bool can_split = f16 ? kernels_->attention_heads_part_f16 != nullptr : kernels_->attention_heads_part != nullptr;
  const bool split = can_split && max_pos + 1 > kAttentionPartPositions;
  int64_t token_parts = 0;  // (token, part) pairs of the step
  for (int32_t pos : kv_rows_.pos) token_parts += attention_parts(int64_t{pos} + 1, split);
  const int32_t heads = grouped ? group_heads(group, token_parts * p.n_head, pool_.n_threads()) : 1;
  const int64_t head_items = p.n_head / heads;
  attention_split_.plan(kv_rows_.pos, head_items, heads, p.head_dim, split);
  const int64_t item_work = std::min(work, kAttentionPartPositions * p.head_dim * 2) * heads;
  // Whether token t is its sequence's only token in the step (a decode token, whose cache rows
  // come from memory: the kernels prefetch them), judged from its neighbours' block tables: a
  // sequence's tokens are consecutive in a step and share one table.
  const int64_t n_tokens = static_cast<int64_t>(kv_rows_.pos.size());
  const auto alone_in_step = [&](int64_t t) {
    const auto table = [&](int64_t u) { return kv_rows_.table_begin[static_cast<size_t>(u)]; };
    return (t == 0 || table(t - 1) != table(t)) && (t + 1 == n_tokens || table(t + 1) != table(t));
  };
  pool_.parallel_for(attention_split_.n_items(), min_chunk(item_work), [&](int slot, int64_t i0, int64_t i1) {
    float* scores = scores_.as<float>() + static_cast<int64_t>(slot) * kMaxGroupHeads * kv_.n_ctx;
    for (int64_t i = i0; i < i1; ++i) {
      const AttentionSplit::Item it = attention_split_.item(i);
      const int64_t t = it.token;
      const int32_t h = static_cast<int32_t>(it.head_item) * heads;  // the first of the item's heads
      const int64_t kv_off = kv_head_offset(h / group, p.head_dim);
      const float* q_head = q + t * n_embd + h * p.head_dim;
      float* out_head = out + t * n_embd + h * p.head_dim;
      const int64_t n_pos = it.j_end;
      const KvRowMap rows{paged ? kv_rows_.table(t) : nullptr, shift, alone_in_step(t)};
      if (it.n_parts > 1) {
        float* part = attention_split_.part_out(it);
        if (f16) {
          kernels_->attention_heads_part_f16(q_head, heads, k_cache_.as<uint16_t>() + layer, v_cache_.as<uint16_t>() + layer,
                                             it.j_begin, it.j_end, rows, p.head_dim, kv_off, p.head_dim, p.kq_scale, scores,
                                             part, attention_split_.part_max(it), attention_split_.part_sum(it));
        } else {
          kernels_->attention_heads_part(q_head, heads, k_cache_.as<float>() + layer, v_cache_.as<float>() + layer,
                                         it.j_begin, it.j_end, rows, p.head_dim, kv_off, p.head_dim, p.kq_scale, scores, part,
                                         attention_split_.part_max(it), attention_split_.part_sum(it));
        }
        if (attention_split_.finish_part(it)) attention_split_.combine(it, out_head);
      } else if (f16 && grouped) {
        kernels_->attention_heads_f16(q_head, heads, k_cache_.as<uint16_t>() + layer, v_cache_.as<uint16_t>() + layer,
                                      n_pos, rows, p.head_dim, kv_off, p.head_dim, p.kq_scale, scores, out_head);
      } else if (f16) {
        kernels_->attention_head_f16(q_head, k_cache_.as<uint16_t>() + layer, v_cache_.as<uint16_t>() + layer, n_pos,
                                     rows, p.head_dim, kv_off, p.head_dim, p.kq_scale, scores, out_head);
      } else if (grouped) {
        kernels_->attention_heads(q_head, heads, k_cache_.as<float>() + layer, v_cache_.as<float>() + layer, n_pos, rows,
                                  p.head_dim, kv_off, p.head_dim, p.kq_scale, scores, out_head);
      } else {
        kernels_->attention_head(q_head, k_cache_.as<float>() + layer, v_cache_.as<float>() + layer, n_pos, rows,
                                 p.head_dim, kv_off, p.head_dim, p.kq_scale, scores, out_head);
      }
    }
  });
  kernels_used_.add(f16 ? KernelsUsed::kAttentionF16 : KernelsUsed::kAttention);
}

}  // namespace

Result<std::string> resolve_cpu_isa(std::string_view requested) {
  BITNET_ASSIGN_OR_RETURN(const KernelSet* set, select_kernel_set(requested, detect_cpu_features()));
  return std::string(set->name);
}

std::unique_ptr<hal::Backend> make_cpu_backend(const CpuOptions& options) {
  const int n = options.n_threads > 0 ? options.n_threads : ThreadPool::hardware_threads();
  return std::make_unique<CpuBackend>(n, select_kernel_set(options.isa, detect_cpu_features()));
}

}  // namespace bitnet::cpu
