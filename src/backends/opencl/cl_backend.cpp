// The OpenCL backend: one context and in-order queue on one device; weights resident, the
// KV cache per layer on the device, every op of a graph one kernel enqueue; only the logits
// are read back. Activations and scratch come from a size-keyed buffer pool.
#include "backends/opencl/cl_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <set>
#include <span>
#include <vector>

#include "backends/opencl/cl_buffer_pool.h"
#include "backends/opencl/cl_device.h"
#include "backends/opencl/cl_kernels.h"
#include "backends/opencl/cl_options.h"
#include "backends/opencl/cl_weights.h"
#include "hal/validate.h"

namespace bitnet::opencl {

namespace {

// Tokens per work-item of the matmul_<type>_q8 kernels (QDOT_TILE in kernels/matmul_q8.cl).
constexpr int64_t kQ8Tile = 4;

// Elements per activation block of the 8-bit path for weights of `f` (0: no such path).
int64_t q8_block(DeviceFormat f) {
  switch (f) {
    case DeviceFormat::kQ4_0: case DeviceFormat::kQ4_1: case DeviceFormat::kQ5_0: case DeviceFormat::kQ5_1:
    case DeviceFormat::kQ8_0: case DeviceFormat::kIQ4_NL:
      return 32;
    case DeviceFormat::kQ2_K: case DeviceFormat::kQ3_K: case DeviceFormat::kQ4_K: case DeviceFormat::kQ5_K:
    case DeviceFormat::kQ6_K: case DeviceFormat::kIQ4_XS:
      return 256;
    default:
      return 0;
  }
}

// The activation quantizer of the CPU's vec_dot for weights of `f`.
std::string_view q8_quantizer(DeviceFormat f) {
  if (f == DeviceFormat::kQ4_1 || f == DeviceFormat::kQ5_1) return "quantize_q8_1";
  return q8_block(f) == 256 ? "quantize_q8_k" : "quantize_q8_0";
}

// The buffers of one activation. F32: f32[n_rows * n_cols]. Q8: i8[n_rows * n_cols] in
// `data`, f32 scale[n_rows] and int32 sum[n_rows].
struct ActBuffers {
  DeviceBuffer data;
  DeviceBuffer scale;
  DeviceBuffer sum;
};

class ClBackend final : public hal::Backend {
 public:
  ClBackend(ClDevice device, ClContext context, ClQueue queue, uint64_t max_alloc, uint64_t budget, bool quant_dot)
      : quant_dot_(quant_dot),
        device_(std::move(device)),
        context_(std::move(context)),
        queue_(std::move(queue)),
        allocator_(context_.get(), max_alloc, budget),
        pool_(allocator_) {}

  Status build_kernels(const ProgramOptions& options) {
    BITNET_ASSIGN_OR_RETURN(kernels_, Kernels::build(context_.get(), device_, options));
    return {};
  }

  hal::BackendInfo info() const override {
    const hal::DeviceInfo& d = device_.info;
    return {d.id, fmt::format("{} ({}, {}, driver {})", d.name, d.vendor, d.api_version, d.driver_version),
            std::max(1, d.compute_units)};
  }

  Status load_weights(std::span<const hal::WeightDesc> weights) override {
    weights_.clear();
    weights_.reserve(weights.size());
    for (const hal::WeightDesc& d : weights) {
      BITNET_ASSIGN_OR_RETURN(DeviceWeight w, upload_weight(d, allocator_, queue_.get()));
      weights_.push_back(std::move(w));
    }
    shapes_ = hal::weight_shapes(weights);
    return {};
  }

  Status init_kv(const hal::KvShape& shape) override;
  Status compute(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<float> logits) override;
  // The part of each row selected on the device (kernels/top_k.cl); only it is read back.
  Status compute_top(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<const hal::TopRequest> req,
                     std::vector<std::vector<hal::TokenLogit>>& out) override;

  std::vector<std::string> kernels_used() const override { return {kernels_used_.begin(), kernels_used_.end()}; }

  uint64_t weight_bytes(hal::WeightId id) const override {
    const DeviceWeight* w = weight(id);
    return w != nullptr ? w->n_bytes : 0;
  }

  hal::BackendStats stats() const override {
    hal::BackendStats s;
    for (const DeviceWeight& w : weights_) s.weight_bytes += w.n_bytes;
    for (const DeviceBuffer& b : k_cache_) s.kv_bytes += b.n_bytes();
    for (const DeviceBuffer& b : v_cache_) s.kv_bytes += b.n_bytes();
    const PoolStats& p = pool_.stats();
    s.pool_allocations = p.allocations;
    s.pool_reuses = p.reuses;
    s.pool_bytes = p.bytes;
    s.pool_peak_bytes = p.peak_bytes;
    return s;
  }

  void release_scratch() override { pool_.clear(); }

 private:
  // Runs the op list; the logits stay on the device until release_acts().
  Status run_graph(const hal::Graph& graph, std::span<const int32_t> tokens);
  Status read_top(const hal::Graph& graph, std::span<const hal::TopRequest> req, std::vector<std::vector<hal::TokenLogit>>& out);
  Status prepare_acts(const hal::Graph& graph);
  void release_acts();
  Status run_op(const hal::Graph& graph, const hal::Op& op);
  Status embed(const hal::Graph& graph, const hal::Op& op);
  Status matmul(const hal::Graph& graph, const hal::Op& op);
  Status matmul_q8(const hal::Graph& graph, const hal::Op& op);
  Status attention(const hal::Graph& graph, const hal::Op& op);
  Status elementwise(const hal::Graph& graph, const hal::Op& op);
  Status upload_rope_table(const hal::Graph& graph);

  // Enqueues kernel `name` over `global` (work-items per dimension; local: BITNET_WG along
  // dimension 0 when `grouped`, else the runtime's choice) and records it as used.
  Status enqueue(std::string_view name, std::array<size_t, 3> global, bool grouped, std::string_view used_as = {});

  const DeviceWeight* weight(hal::WeightId id) const {
    return id >= 0 && static_cast<size_t>(id) < weights_.size() ? &weights_[static_cast<size_t>(id)] : nullptr;
  }
  cl_mem act(hal::ActId id) const { return acts_[static_cast<size_t>(id)].data.get(); }

  // Members in dependency order: buffers are released before the allocator and the context.
  bool quant_dot_ = true;  // ClOptions::quant_dot
  ClDevice device_;
  ClContext context_;
  ClQueue queue_;
  ClAllocator allocator_;
  BufferPool pool_;
  Kernels kernels_;
  std::vector<DeviceWeight> weights_;
  std::vector<hal::WeightShape> shapes_;  // for hal::validate_graph
  hal::KvShape kv_;
  std::vector<DeviceBuffer> k_cache_;  // per layer: [n_ctx][n_embd_kv] f32
  std::vector<DeviceBuffer> v_cache_;
  std::vector<ActBuffers> acts_;       // during compute()
  DeviceBuffer tokens_;                // during compute(): int32[n_tokens]
  // During compute(): the step's KV addressing (hal::resolve_kv) as int32
  // [cache row of each token's position][position][table start][tables...].
  DeviceBuffer kv_map_;
  int64_t kv_block_ = 0;
  DeviceBuffer scores_;                // during compute(), attention scratch
  DeviceBuffer rope_table_;            // during compute(): float2 (cos, sin)[n_tokens][n_rot / 2]
  std::vector<float> rope_host_;       // its host copy, alive until the queue has read it
  std::set<std::string> kernels_used_;
};

Status ClBackend::init_kv(const hal::KvShape& shape) {
  k_cache_.clear();
  v_cache_.clear();
  kv_ = shape;
  kv_.type = hal::KvType::kF32;  // no F16 attention kernel yet: an F16 request gets F32 (stats().kv_type)
  if (shape.n_layer <= 0 || shape.n_ctx <= 0 || shape.n_embd_kv <= 0) return invalid_argument("empty KV cache shape");
  const size_t n_bytes = static_cast<size_t>(shape.n_ctx * shape.n_embd_kv) * sizeof(float);
  for (int32_t il = 0; il < shape.n_layer; ++il) {
    for (auto* cache : {&k_cache_, &v_cache_}) {
      auto b = allocator_.create(n_bytes, fmt::format("KV cache of layer {}", il));
      if (!b.ok()) {
        k_cache_.clear();
        v_cache_.clear();
        kv_ = {};
        return b.status();
      }
      const float zero = 0.0f;
      BITNET_CL_RETURN_IF_ERROR(clEnqueueFillBuffer(queue_.get(), b->get(), &zero, sizeof(zero), 0, n_bytes, 0,
                                                    nullptr, nullptr),
                                "clearing the KV cache");
      cache->push_back(std::move(b).value());
    }
  }
  return cl_status(clFinish(queue_.get()), "clearing the KV cache");
}

Status ClBackend::prepare_acts(const hal::Graph& graph) {
  acts_.resize(graph.acts.size());
  for (size_t i = 0; i < graph.acts.size(); ++i) {
    const hal::ActDesc& d = graph.acts[i];
    const size_t n = static_cast<size_t>(d.n_rows * d.n_cols);
    ActBuffers& b = acts_[i];
    if (d.type == hal::ActType::kF32) {
      BITNET_ASSIGN_OR_RETURN(b.data, pool_.acquire(n * sizeof(float), d.name));
    } else {
      BITNET_ASSIGN_OR_RETURN(b.data, pool_.acquire(n, d.name));
      BITNET_ASSIGN_OR_RETURN(b.scale, pool_.acquire(static_cast<size_t>(d.n_rows) * sizeof(float), d.name));
      BITNET_ASSIGN_OR_RETURN(b.sum, pool_.acquire(static_cast<size_t>(d.n_rows) * sizeof(int32_t), d.name));
    }
  }
  return {};
}

void ClBackend::release_acts() {
  for (ActBuffers& b : acts_) {
    pool_.release(std::move(b.data));
    pool_.release(std::move(b.scale));
    pool_.release(std::move(b.sum));
  }
  acts_.clear();
  pool_.release(std::move(tokens_));
  pool_.release(std::move(kv_map_));
  pool_.release(std::move(scores_));
  pool_.release(std::move(rope_table_));
}

Status ClBackend::compute(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<float> logits) {
  BITNET_RETURN_IF_ERROR(hal::validate_graph(graph, tokens, logits.size(), shapes_, k_cache_.empty() ? hal::KvShape{} : kv_));
  Status status = run_graph(graph, tokens);
  if (status.ok()) {
    status = cl_status(clEnqueueReadBuffer(queue_.get(), act(graph.logits), CL_TRUE, 0, logits.size_bytes(),
                                           logits.data(), 0, nullptr, nullptr),
                       "reading the logits");
  } else {
    (void)clFinish(queue_.get());  // nothing in flight may still use the buffers handed back below
  }
  release_acts();
  return status;
}

Status ClBackend::compute_top(const hal::Graph& graph, std::span<const int32_t> tokens,
                              std::span<const hal::TopRequest> req, std::vector<std::vector<hal::TokenLogit>>& out) {
  BITNET_ASSIGN_OR_RETURN(const hal::ActDesc* a, hal::top_logits(graph, req.size()));
  BITNET_RETURN_IF_ERROR(hal::validate_graph(graph, tokens, static_cast<size_t>(a->n_rows * a->n_cols), shapes_,
                                             k_cache_.empty() ? hal::KvShape{} : kv_));
  Status status = run_graph(graph, tokens);
  if (status.ok()) status = read_top(graph, req, out);
  if (!status.ok()) (void)clFinish(queue_.get());
  release_acts();
  return status;
}

Status ClBackend::read_top(const hal::Graph& graph, std::span<const hal::TopRequest> req,
                           std::vector<std::vector<hal::TokenLogit>>& out) {
  const hal::ActDesc& a = graph.acts[static_cast<size_t>(graph.logits)];
  hal::TopPlan plan;
  if (!hal::plan_top(req, a.n_cols, plan)) return invalid_argument("too many logits asked for");
  BITNET_ASSIGN_OR_RETURN(DeviceBuffer args, pool_.acquire(plan.words.size() * sizeof(int32_t), "top-k arguments"));
  const size_t n_out = static_cast<size_t>(std::max<int64_t>(plan.n_out, 1));
  BITNET_ASSIGN_OR_RETURN(DeviceBuffer entries, pool_.acquire(n_out * 2 * sizeof(int32_t), "top-k entries"));
  Status s = cl_status(clEnqueueWriteBuffer(queue_.get(), args.get(), CL_TRUE, 0, plan.words.size() * sizeof(int32_t),
                                            plan.words.data(), 0, nullptr, nullptr),
                       "uploading the top-k arguments");
  cl_kernel k = kernels_.get("top_k_rows");
  if (s.ok()) s = set_args(k, act(graph.logits), static_cast<cl_int>(a.n_cols), static_cast<cl_int>(a.n_rows), args.get(), entries.get());
  if (s.ok()) s = enqueue("top_k_rows", {static_cast<size_t>(a.n_rows) * static_cast<size_t>(kernels_.work_group()), 1, 1}, true);
  std::vector<int32_t> host(n_out * 2);
  if (s.ok()) {
    s = cl_status(clEnqueueReadBuffer(queue_.get(), entries.get(), CL_TRUE, 0, host.size() * sizeof(int32_t), host.data(), 0,
                                      nullptr, nullptr),
                  "reading the selected logits");
  }
  pool_.release(std::move(args));
  pool_.release(std::move(entries));
  BITNET_RETURN_IF_ERROR(s);
  hal::unpack_top(plan, host.data(), out);
  return {};
}

Status ClBackend::run_graph(const hal::Graph& graph, std::span<const int32_t> tokens) {
  Status status = prepare_acts(graph);
  if (status.ok()) {
    auto t = pool_.acquire(tokens.size_bytes(), "token ids");
    if (t.ok()) {
      tokens_ = std::move(t).value();
      status = cl_status(clEnqueueWriteBuffer(queue_.get(), tokens_.get(), CL_TRUE, 0, tokens.size_bytes(),
                                              tokens.data(), 0, nullptr, nullptr),
                         "uploading token ids");
    } else {
      status = t.status();
    }
  }
  if (status.ok()) {
    const hal::KvRows kv = hal::resolve_kv(graph, kv_);
    const size_t n = static_cast<size_t>(graph.n_tokens);
    std::vector<int32_t> host(3 * n);
    for (size_t t = 0; t < n; ++t) {
      host[t] = static_cast<int32_t>(kv.row(static_cast<int64_t>(t), kv.pos[t]));
      host[n + t] = kv.pos[t];
      host[2 * n + t] = kv.table_begin[t];
    }
    host.insert(host.end(), kv.tables.begin(), kv.tables.end());
    kv_block_ = kv.block_size;
    auto b = pool_.acquire(host.size() * sizeof(int32_t), "KV map");
    if (b.ok()) {
      kv_map_ = std::move(b).value();
      status = cl_status(clEnqueueWriteBuffer(queue_.get(), kv_map_.get(), CL_TRUE, 0, host.size() * sizeof(int32_t),
                                              host.data(), 0, nullptr, nullptr),
                         "uploading the KV map");
    } else {
      status = b.status();
    }
  }
  for (size_t i = 0; status.ok() && i < graph.ops.size(); ++i) {
    status = run_op(graph, graph.ops[i]);
    if (!status.ok()) status = status.with_context(fmt::format("op {} ({})", i, hal::op_name(graph.ops[i].kind)));
  }
  return status;
}

Status ClBackend::enqueue(std::string_view name, std::array<size_t, 3> global, bool grouped, std::string_view used_as) {
  if (global[0] == 0 || global[1] == 0 || global[2] == 0) return {};
  const cl_uint dims = global[2] > 1 ? 3 : global[1] > 1 ? 2 : 1;
  const size_t local[3] = {static_cast<size_t>(kernels_.work_group()), 1, 1};
  const cl_int err = clEnqueueNDRangeKernel(queue_.get(), kernels_.get(name), dims, nullptr, global.data(),
                                            grouped ? local : nullptr, 0, nullptr, nullptr);
  BITNET_RETURN_IF_ERROR(cl_status(err, fmt::format("enqueueing {}", name)));
  kernels_used_.insert(fmt::format("opencl:{}", used_as.empty() ? name : used_as));
  return {};
}

Status ClBackend::run_op(const hal::Graph& graph, const hal::Op& op) {
  const auto desc = [&](hal::ActId id) -> const hal::ActDesc& { return graph.acts[static_cast<size_t>(id)]; };
  const size_t wg = static_cast<size_t>(kernels_.work_group());
  switch (op.kind) {
    case hal::OpKind::kEmbed:
      return embed(graph, op);
    case hal::OpKind::kRmsNorm: {
      const hal::ActDesc& d = desc(op.dst);
      const DeviceWeight* w = weight(op.w);  // 1-D weights are uploaded as F32
      // Per-head slices (n_head > 0) are rows of their own: the slices of a row are contiguous.
      const int64_t slices = op.n_head > 0 ? op.n_head : 1;
      cl_kernel k = kernels_.get("rms_norm_f32");
      BITNET_RETURN_IF_ERROR(set_args(k, act(op.dst), act(op.a), w->chunks[0].data.get(),
                                      static_cast<cl_int>(d.n_cols / slices), op.eps));
      return enqueue("rms_norm_f32", {static_cast<size_t>(d.n_rows * slices) * wg, 1, 1}, true);
    }
    case hal::OpKind::kQuantizeAct: {
      const hal::ActDesc& d = desc(op.dst);
      const ActBuffers& q = acts_[static_cast<size_t>(op.dst)];
      cl_kernel k = kernels_.get("quantize_act");
      BITNET_RETURN_IF_ERROR(set_args(k, q.data.get(), q.scale.get(), q.sum.get(), act(op.a), static_cast<cl_int>(d.n_cols)));
      return enqueue("quantize_act", {static_cast<size_t>(d.n_rows) * wg, 1, 1}, true);
    }
    case hal::OpKind::kMatmul:
      return matmul(graph, op);
    case hal::OpKind::kScale: {
      const hal::ActDesc& d = desc(op.dst);
      const DeviceWeight* w = weight(op.w);
      cl_kernel k = kernels_.get("scale_f32");
      const auto n = static_cast<cl_ulong>(d.n_rows * d.n_cols);
      BITNET_RETURN_IF_ERROR(set_args(k, act(op.dst), w->chunks[0].data.get(), n));
      return enqueue("scale_f32", {n, 1, 1}, false);
    }
    case hal::OpKind::kBias: {
      const hal::ActDesc& d = desc(op.dst);
      const DeviceWeight* w = weight(op.w);  // 1-D weights are uploaded as F32
      cl_kernel k = kernels_.get("bias_f32");
      const auto n = static_cast<cl_ulong>(d.n_rows * d.n_cols);
      BITNET_RETURN_IF_ERROR(set_args(k, act(op.dst), w->chunks[0].data.get(), static_cast<cl_ulong>(d.n_cols), n));
      return enqueue("bias_f32", {n, 1, 1}, false);
    }
    case hal::OpKind::kRope: {
      const hal::ActDesc& d = desc(op.dst);
      const hal::RopeParams& p = graph.rope;
      const int32_t head_dim = graph.attn.head_dim;
      BITNET_RETURN_IF_ERROR(upload_rope_table(graph));
      const cl_int neox = p.style == hal::RopeStyle::kNeox ? 1 : 0;
      cl_kernel k = kernels_.get("rope_f32");
      BITNET_RETURN_IF_ERROR(set_args(k, act(op.dst), rope_table_.get(), static_cast<cl_int>(d.n_cols),
                                      static_cast<cl_int>(head_dim), static_cast<cl_int>(p.n_rot), neox));
      return enqueue("rope_f32", {static_cast<size_t>(p.n_rot / 2), static_cast<size_t>(op.n_head), static_cast<size_t>(d.n_rows)},
                     false, neox ? "rope_neox_f32" : "rope_norm_f32");
    }
    case hal::OpKind::kStoreKv: {
      const hal::ActDesc& d = desc(op.a);
      const auto il = static_cast<size_t>(op.il);
      cl_kernel k = kernels_.get("store_kv_f32");
      BITNET_RETURN_IF_ERROR(set_args(k, k_cache_[il].get(), v_cache_[il].get(), act(op.a), act(op.b),
                                      static_cast<cl_int>(kv_.n_embd_kv), kv_map_.get()));
      return enqueue("store_kv_f32", {static_cast<size_t>(d.n_cols), static_cast<size_t>(d.n_rows), 1}, false);
    }
    case hal::OpKind::kAttention:
      return attention(graph, op);
    case hal::OpKind::kSiluMul:
    case hal::OpKind::kRelu2Mul:
    case hal::OpKind::kAdd:
      return elementwise(graph, op);
    case hal::OpKind::kGetRows: {
      const hal::ActDesc& d = desc(op.dst);
      const size_t row_bytes = static_cast<size_t>(d.n_cols) * sizeof(float);
      for (int64_t i = 0; i < d.n_rows; ++i) {
        const size_t src = static_cast<size_t>(graph.get_rows[static_cast<size_t>(i)]) * row_bytes;
        BITNET_RETURN_IF_ERROR(cl_status(clEnqueueCopyBuffer(queue_.get(), act(op.a), act(op.dst), src,
                                                             static_cast<size_t>(i) * row_bytes, row_bytes, 0, nullptr, nullptr),
                                         "copying rows"));
      }
      kernels_used_.insert("opencl:get_rows");
      return {};
    }
    case hal::OpKind::kCopyRows: {
      const hal::ActDesc& d = desc(op.dst);
      const hal::ActDesc& s = desc(op.a);
      cl_kernel k = kernels_.get("copy_rows_f32");
      const auto n = static_cast<cl_ulong>(d.n_rows * d.n_cols);
      BITNET_RETURN_IF_ERROR(set_args(k, act(op.dst), act(op.a), static_cast<cl_ulong>(op.row0 * s.n_cols), n));
      return enqueue("copy_rows_f32", {n, 1, 1}, false);
    }
  }
  return internal_error("unknown op");
}

Status ClBackend::embed(const hal::Graph& graph, const hal::Op& op) {
  const DeviceWeight* w = weight(op.w);  // token ids were checked by hal::validate_graph
  const std::string name = fmt::format("embed_{}", format_name(w->format));
  cl_kernel k = kernels_.get(name);
  for (const WeightChunk& c : w->chunks) {
    cl_mem scales = c.scales ? c.scales.get() : c.data.get();
    BITNET_RETURN_IF_ERROR(set_args(k, act(op.dst), tokens_.get(), c.data.get(), scales, static_cast<cl_int>(w->n_cols),
                                    static_cast<cl_int>(c.row0), static_cast<cl_int>(c.n_rows)));
    BITNET_RETURN_IF_ERROR(enqueue(name, {static_cast<size_t>(w->n_cols), static_cast<size_t>(graph.n_tokens), 1}, false));
  }
  return {};
}

Status ClBackend::matmul(const hal::Graph& graph, const hal::Op& op) {
  const DeviceWeight* w = weight(op.w);  // shapes and types were checked by hal::validate_graph
  const hal::ActDesc& src = graph.acts[static_cast<size_t>(op.a)];
  const size_t wg = static_cast<size_t>(kernels_.work_group());
  if (src.type == hal::ActType::kQ8) {
    const ActBuffers& x = acts_[static_cast<size_t>(op.a)];
    cl_kernel k = kernels_.get("matmul_w2a8");
    for (const WeightChunk& c : w->chunks) {
      BITNET_RETURN_IF_ERROR(set_args(k, act(op.dst), x.data.get(), x.scale.get(), c.data.get(), c.scales.get(),
                                      static_cast<cl_int>(w->n_cols), static_cast<cl_int>(w->n_rows),
                                      static_cast<cl_int>(c.row0), static_cast<cl_int>(w->words_per_block)));
      BITNET_RETURN_IF_ERROR(enqueue("matmul_w2a8", {static_cast<size_t>(c.n_rows) * wg, static_cast<size_t>(src.n_rows), 1}, true));
    }
    return {};
  }
  if (quant_dot_ && q8_block(w->format) > 0 && w->n_cols % q8_block(w->format) == 0) return matmul_q8(graph, op);
  const std::string name = fmt::format("matmul_{}", format_name(w->format));
  cl_kernel k = kernels_.get(name);
  for (const WeightChunk& c : w->chunks) {
    cl_mem scales = c.scales ? c.scales.get() : c.data.get();
    BITNET_RETURN_IF_ERROR(set_args(k, act(op.dst), act(op.a), c.data.get(), scales, static_cast<cl_int>(w->n_cols),
                                    static_cast<cl_int>(w->n_rows), static_cast<cl_int>(c.row0),
                                    static_cast<cl_int>(c.n_rows), static_cast<cl_int>(src.n_rows)));
    const size_t rows_per_group = wg / 8;  // 8 lanes a row (kernels/matmul_float.cl)
    const size_t n_groups = (static_cast<size_t>(c.n_rows) + rows_per_group - 1) / rows_per_group;
    const size_t n_tiles = (static_cast<size_t>(src.n_rows) + kTokenTile - 1) / kTokenTile;
    BITNET_RETURN_IF_ERROR(enqueue(name, {n_groups * wg, n_tiles, 1}, true));
  }
  return {};
}

// The 8-bit activation path (kernels/matmul_q8.cl): the float activations quantized once to
// the CPU's activation blocks for this weight type (Q8_0, Q8_1 or Q8_K), then one integer-dot
// kernel enqueue per weight chunk. The scratch goes back to the pool once enqueued: the queue
// is in order, so a later user of the same buffers runs after these kernels.
Status ClBackend::matmul_q8(const hal::Graph& graph, const hal::Op& op) {
  const DeviceWeight* w = weight(op.w);
  const hal::ActDesc& src = graph.acts[static_cast<size_t>(op.a)];
  const int64_t block = q8_block(w->format);
  const std::string_view quantizer = q8_quantizer(w->format);
  const auto n_elems = static_cast<size_t>(src.n_rows * src.n_cols);
  const auto n_blocks = static_cast<cl_uint>(n_elems / static_cast<size_t>(block));
  BITNET_ASSIGN_OR_RETURN(DeviceBuffer q, pool_.acquire(n_elems, "8-bit activations"));
  auto meta = pool_.acquire(n_elems / 32 * 2 * sizeof(uint32_t), "8-bit activation scales");
  if (!meta.ok()) {
    pool_.release(std::move(q));
    return meta.status();
  }
  Status status = set_args(kernels_.get(quantizer), q.get(), meta->get(), act(op.a), n_blocks);
  if (status.ok()) status = enqueue(quantizer, {n_blocks, 1, 1}, false);
  const std::string name = fmt::format("matmul_{}_q8", format_name(w->format));
  const std::string used_as = fmt::format("matmul_{}_{}", format_name(w->format), kernels_.int8_dot() ? "dot" : "int");
  cl_kernel k = kernels_.get(name);
  const size_t n_tiles = (static_cast<size_t>(src.n_rows) + kQ8Tile - 1) / kQ8Tile;
  for (size_t i = 0; status.ok() && i < w->chunks.size(); ++i) {
    const WeightChunk& c = w->chunks[i];
    cl_mem scales = c.scales ? c.scales.get() : c.data.get();
    status = set_args(k, act(op.dst), q.get(), meta->get(), c.data.get(), scales, static_cast<cl_int>(w->n_cols),
                      static_cast<cl_int>(w->n_rows), static_cast<cl_int>(c.row0), static_cast<cl_int>(c.n_rows),
                      static_cast<cl_int>(src.n_rows));
    if (status.ok()) status = enqueue(name, {static_cast<size_t>(c.n_rows), n_tiles, 1}, false, used_as);
  }
  pool_.release(std::move(q));
  pool_.release(std::move(meta).value());
  return status;
}

Status ClBackend::attention(const hal::Graph& graph, const hal::Op& op) {
  const hal::AttentionParams& p = graph.attn;
  const hal::ActDesc& q = graph.acts[static_cast<size_t>(op.a)];
  // Scores of every (token, head) over the whole context: sized by n_ctx so that every
  // decode step asks the pool for the same buffer.
  const size_t n_scores = static_cast<size_t>(q.n_rows * p.n_head * kv_.n_ctx);
  if (!scores_ || scores_.n_bytes() < n_scores * sizeof(float)) {
    pool_.release(std::move(scores_));
    BITNET_ASSIGN_OR_RETURN(scores_, pool_.acquire(n_scores * sizeof(float), "attention scores"));
  }
  const auto il = static_cast<size_t>(op.il);
  cl_kernel k = kernels_.get("attention_f32");
  BITNET_RETURN_IF_ERROR(set_args(k, act(op.dst), act(op.a), k_cache_[il].get(), v_cache_[il].get(), scores_.get(),
                                  static_cast<cl_int>(p.n_head), static_cast<cl_int>(p.head_dim),
                                  static_cast<cl_int>(p.n_head / p.n_head_kv), static_cast<cl_int>(kv_.n_embd_kv),
                                  kv_map_.get(), static_cast<cl_int>(graph.n_tokens), static_cast<cl_int>(kv_block_),
                                  static_cast<cl_int>(kv_.n_ctx), p.kq_scale));
  const size_t wg = static_cast<size_t>(kernels_.work_group());
  return enqueue("attention_f32", {static_cast<size_t>(p.n_head) * wg, static_cast<size_t>(q.n_rows), 1}, true);
}

// The angles of every (token, pair) of this step, computed on the host exactly as the CPU
// reference computes them (llama.cpp's float recurrence theta *= theta_scale, then std::cos and
// std::sin), once per compute() and shared by every rope op of the graph: the device's cos/sin
// differ from libm's by an ulp now and then, enough to flip an int8 activation downstream.
// Rotating the rows (the op itself) runs on the device.
Status ClBackend::upload_rope_table(const hal::Graph& graph) {
  if (rope_table_) return {};
  const hal::RopeParams& p = graph.rope;
  const int32_t n_pairs = p.n_rot / 2;
  rope_host_.assign(static_cast<size_t>(graph.n_tokens * n_pairs * 2), 0.0f);
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  for (int64_t t = 0; t < graph.n_tokens; ++t) {
    float theta = static_cast<float>(graph.position(t)) * p.freq_scale;
    float* row = rope_host_.data() + t * n_pairs * 2;
    for (int32_t i = 0; i < n_pairs; ++i) {
      row[2 * i] = std::cos(theta);
      row[2 * i + 1] = std::sin(theta);
      theta *= theta_scale;
    }
  }
  const size_t n_bytes = rope_host_.size() * sizeof(float);
  BITNET_ASSIGN_OR_RETURN(rope_table_, pool_.acquire(n_bytes, "rope table"));
  return cl_status(clEnqueueWriteBuffer(queue_.get(), rope_table_.get(), CL_FALSE, 0, n_bytes, rope_host_.data(), 0,
                                        nullptr, nullptr),
                   "uploading the rope table");
}

Status ClBackend::elementwise(const hal::Graph& graph, const hal::Op& op) {
  const hal::ActDesc& d = graph.acts[static_cast<size_t>(op.dst)];
  const int64_t n = d.n_rows * d.n_cols;
  const std::string name = fmt::format("{}_f32", hal::op_name(op.kind));
  cl_kernel k = kernels_.get(name);
  BITNET_RETURN_IF_ERROR(set_args(k, act(op.dst), act(op.a), act(op.b), static_cast<cl_ulong>(n)));
  return enqueue(name, {static_cast<size_t>(n), 1, 1}, false);
}

// The work-group size: a power of two, at most the device's and the requested one.
int pick_work_group(const ClDevice& d, int requested) {
  int wg = 1;
  while (wg * 2 <= requested && static_cast<size_t>(wg * 2) <= d.max_work_group) wg *= 2;
  return wg;
}

}  // namespace

Result<std::unique_ptr<hal::Backend>> make_backend(const ClOptions& options) {
  BITNET_ASSIGN_OR_RETURN(std::vector<ClDevice> devices, enumerate_devices());
  if (options.device_index < 0 || static_cast<size_t>(options.device_index) >= devices.size()) {
    return invalid_argument(fmt::format("OpenCL device {} does not exist ({} found)", options.device_index, devices.size()));
  }
  ClDevice device = std::move(devices[static_cast<size_t>(options.device_index)]);
  if (clGetDeviceInfo(device.device, CL_DEVICE_ENDIAN_LITTLE, 0, nullptr, nullptr) == CL_SUCCESS) {
    cl_bool little = CL_TRUE;
    clGetDeviceInfo(device.device, CL_DEVICE_ENDIAN_LITTLE, sizeof(little), &little, nullptr);
    if (little != CL_TRUE) return unsupported(fmt::format("{} is big-endian", device.info.name));
  }
  cl_int err = CL_SUCCESS;
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device.platform), 0};
  ClContext context(clCreateContext(props, 1, &device.device, nullptr, nullptr, &err));
  BITNET_CL_RETURN_IF_ERROR(err, "clCreateContext");
  ClQueue queue(clCreateCommandQueue(context.get(), device.device, 0, &err));
  BITNET_CL_RETURN_IF_ERROR(err, "clCreateCommandQueue");

  uint64_t max_alloc = device.info.max_alloc_bytes > 0 ? device.info.max_alloc_bytes : (uint64_t{1} << 28);
  if (options.max_alloc_bytes > 0) max_alloc = std::min(max_alloc, options.max_alloc_bytes);
  ProgramOptions program;
  program.work_group = pick_work_group(device, options.work_group);
  if (program.work_group < 8) {
    return unsupported(fmt::format("{} runs work-groups of at most {} work-items; the kernels need 8", device.info.name,
                                   device.max_work_group));
  }
  program.fp64 = device.fp64;
  program.int8_dot = device.info.int8_dot;
  program.correctly_rounded_div = device.correctly_rounded_div;
  auto backend = std::make_unique<ClBackend>(std::move(device), std::move(context), std::move(queue), max_alloc,
                                             options.memory_budget_bytes, options.quant_dot);
  BITNET_RETURN_IF_ERROR(backend->build_kernels(program));
  return std::unique_ptr<hal::Backend>(std::move(backend));
}

Result<std::unique_ptr<hal::Backend>> make_backend(int device_index) {
  ClOptions options;
  options.device_index = device_index;
  return make_backend(options);
}

}  // namespace bitnet::opencl
