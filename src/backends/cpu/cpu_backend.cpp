#include "backends/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/weights.h"
#include "core/check.h"
#include "core/thread_pool.h"
#include "hal/validate.h"
#include "quant/act_quant.h"

namespace bitnet::cpu {

namespace {

// Smallest useful piece of parallel work, in multiply-adds: below it, waking a worker costs
// more than it saves (a tiny model's decode step is faster on one thread).
constexpr int64_t kMinWorkPerChunk = 1 << 15;

// Items per chunk so that each chunk holds at least kMinWorkPerChunk of work.
int64_t min_chunk(int64_t work_per_item, int64_t floor = 1) {
  return std::max(floor, kMinWorkPerChunk / std::max<int64_t>(1, work_per_item));
}

// One activation buffer. F32: f32[n_rows * n_cols]; Q8: i8 + per-row scale and sum.
struct ActBuffer {
  std::vector<float> f32;
  std::vector<int8_t> i8;
  std::vector<float> scale;
  std::vector<int32_t> sum;
};

class CpuBackend final : public hal::Backend {
 public:
  explicit CpuBackend(int n_threads) : pool_(n_threads) {}

  hal::BackendInfo info() const override {
    return {"cpu-scalar", "host CPU", pool_.n_threads()};
  }

  Status load_weights(std::span<const hal::WeightDesc> weights) override {
    weights_.clear();
    weights_.reserve(weights.size());
    for (const hal::WeightDesc& d : weights) {
      BITNET_ASSIGN_OR_RETURN(CpuWeight w, prepare_weight(d));
      weights_.push_back(std::move(w));
    }
    shapes_ = hal::weight_shapes(weights);
    return {};
  }

  Status init_kv(const hal::KvShape& shape) override {
    kv_ = {};  // set only once the cache exists: compute() refuses to run before
    const size_t n = static_cast<size_t>(shape.n_layer) * static_cast<size_t>(shape.n_ctx) *
                     static_cast<size_t>(shape.n_embd_kv);
    try {
      k_cache_.assign(n, 0.0f);
      v_cache_.assign(n, 0.0f);
    } catch (const std::bad_alloc&) {
      return out_of_memory(fmt::format("KV cache of {} MiB", 2 * n * sizeof(float) >> 20));
    }
    kv_ = shape;
    return {};
  }

  Status compute(const hal::Graph& graph, std::span<const int32_t> tokens,
                 std::span<float> logits) override;

  std::vector<std::string> kernels_used() const override {
    return {kernels_used_.begin(), kernels_used_.end()};
  }

 private:
  const CpuWeight& weight(hal::WeightId id) const { return weights_[static_cast<size_t>(id)]; }
  void prepare_acts(const hal::Graph& graph);
  Status run_op(const hal::Graph& graph, const hal::Op& op, std::span<const int32_t> tokens);
  void matmul(const hal::Graph& graph, const hal::Op& op);
  void attention(const hal::Graph& graph, const hal::Op& op);
  float* kv_row(std::vector<float>& cache, int32_t il, int64_t pos) {
    return cache.data() + (static_cast<int64_t>(il) * kv_.n_ctx + pos) * kv_.n_embd_kv;
  }

  ThreadPool pool_;
  std::vector<CpuWeight> weights_;
  std::vector<hal::WeightShape> shapes_;  // for hal::validate_graph
  hal::KvShape kv_;
  std::vector<float> k_cache_;  // [n_layer][n_ctx][n_embd_kv]
  std::vector<float> v_cache_;
  std::vector<ActBuffer> acts_;
  std::set<std::string> kernels_used_;
};

void CpuBackend::prepare_acts(const hal::Graph& graph) {
  acts_.resize(graph.acts.size());
  for (size_t i = 0; i < graph.acts.size(); ++i) {
    const hal::ActDesc& d = graph.acts[i];
    const size_t n = static_cast<size_t>(d.n_rows * d.n_cols);
    ActBuffer& b = acts_[i];
    if (d.type == hal::ActType::kF32) {
      b.f32.resize(n);
    } else {
      b.i8.resize(n);
      b.scale.resize(static_cast<size_t>(d.n_rows));
      b.sum.resize(static_cast<size_t>(d.n_rows));
    }
  }
}

Status CpuBackend::compute(const hal::Graph& graph, std::span<const int32_t> tokens,
                           std::span<float> logits) {
  BITNET_RETURN_IF_ERROR(hal::validate_graph(graph, tokens, logits.size(), shapes_, kv_));
  prepare_acts(graph);
  for (const hal::Op& op : graph.ops) BITNET_RETURN_IF_ERROR(run_op(graph, op, tokens));
  const std::vector<float>& out = acts_[static_cast<size_t>(graph.logits)].f32;
  std::copy(out.begin(), out.end(), logits.begin());
  return {};
}

Status CpuBackend::run_op(const hal::Graph& graph, const hal::Op& op,
                          std::span<const int32_t> tokens) {
  const auto desc = [&](hal::ActId id) -> const hal::ActDesc& {
    return graph.acts[static_cast<size_t>(id)];
  };
  const auto f32 = [&](hal::ActId id) { return acts_[static_cast<size_t>(id)].f32.data(); };
  switch (op.kind) {
    case hal::OpKind::kEmbed: {
      const CpuWeight& w = weight(op.w);  // token ids were checked by hal::validate_graph
      for (int64_t t = 0; t < graph.n_tokens; ++t) {
        dequantize_row(w, tokens[static_cast<size_t>(t)], f32(op.dst) + t * w.n_cols);
      }
      kernels_used_.insert("embed_scalar");
      return {};
    }
    case hal::OpKind::kRmsNorm: {
      const hal::ActDesc& d = desc(op.dst);
      const float* g = weight(op.w).values.data();
      const float* x = f32(op.a);
      float* y = f32(op.dst);
      pool_.parallel_for(d.n_rows, min_chunk(d.n_cols), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) rms_norm_row(x + r * d.n_cols, g, d.n_cols, op.eps, y + r * d.n_cols);
      });
      kernels_used_.insert("rms_norm_scalar");
      return {};
    }
    case hal::OpKind::kQuantizeAct: {
      const hal::ActDesc& d = desc(op.dst);
      const float* x = f32(op.a);
      ActBuffer& q = acts_[static_cast<size_t>(op.dst)];
      for (int64_t r = 0; r < d.n_rows; ++r) {
        q.scale[static_cast<size_t>(r)] = quant::act_quant_i8(
            x + r * d.n_cols, d.n_cols, q.i8.data() + r * d.n_cols, &q.sum[static_cast<size_t>(r)]);
      }
      kernels_used_.insert("act_quant_i8_scalar");
      return {};
    }
    case hal::OpKind::kMatmul:
      matmul(graph, op);
      return {};
    case hal::OpKind::kScale: {
      const hal::ActDesc& d = desc(op.dst);
      const float s = weight(op.w).values[0];
      float* y = f32(op.dst);
      for (int64_t i = 0; i < d.n_rows * d.n_cols; ++i) y[i] *= s;
      kernels_used_.insert("scale_scalar");
      return {};
    }
    case hal::OpKind::kRope: {
      const hal::ActDesc& d = desc(op.dst);
      float* x = f32(op.dst);
      for (int64_t t = 0; t < d.n_rows; ++t) {
        rope_row(x + t * d.n_cols, op.n_head, graph.attn.head_dim, graph.pos0 + t, graph.rope);
      }
      kernels_used_.insert(graph.rope.style == hal::RopeStyle::kNeox ? "rope_neox_scalar" : "rope_norm_scalar");
      return {};
    }
    case hal::OpKind::kStoreKv: {
      const hal::ActDesc& d = desc(op.a);
      for (int64_t t = 0; t < d.n_rows; ++t) {
        std::memcpy(kv_row(k_cache_, op.il, graph.pos0 + t), f32(op.a) + t * d.n_cols, d.n_cols * sizeof(float));
        std::memcpy(kv_row(v_cache_, op.il, graph.pos0 + t), f32(op.b) + t * d.n_cols, d.n_cols * sizeof(float));
      }
      return {};
    }
    case hal::OpKind::kAttention:
      attention(graph, op);
      return {};
    case hal::OpKind::kSiluMul:
    case hal::OpKind::kRelu2Mul:
    case hal::OpKind::kAdd: {
      const hal::ActDesc& d = desc(op.dst);
      const float* a = f32(op.a);
      const float* b = f32(op.b);
      float* y = f32(op.dst);
      const auto fn = op.kind == hal::OpKind::kSiluMul ? silu_mul
                      : op.kind == hal::OpKind::kRelu2Mul ? relu2_mul : add;
      pool_.parallel_for(d.n_rows * d.n_cols, min_chunk(1), [&](int64_t i0, int64_t i1) {
        fn(a + i0, b + i0, i1 - i0, y + i0);
      });
      kernels_used_.insert(std::string(hal::op_name(op.kind)) + "_scalar");
      return {};
    }
    case hal::OpKind::kCopyRows: {
      const hal::ActDesc& d = desc(op.dst);
      std::memcpy(f32(op.dst), f32(op.a) + op.row0 * d.n_cols, d.n_rows * d.n_cols * sizeof(float));
      return {};
    }
  }
  return internal_error("unknown op");
}

void CpuBackend::matmul(const hal::Graph& graph, const hal::Op& op) {
  const CpuWeight& w = weight(op.w);
  const hal::ActDesc& src = graph.acts[static_cast<size_t>(op.a)];
  ActBuffer& x = acts_[static_cast<size_t>(op.a)];
  float* y = acts_[static_cast<size_t>(op.dst)].f32.data();
  const int64_t n_tokens = src.n_rows;
  if (src.type == hal::ActType::kQ8) {
    BITNET_CHECK(w.is_ternary());
    pool_.parallel_for(w.n_rows, min_chunk(w.n_cols * n_tokens, 16), [&](int64_t r0, int64_t r1) {
      matmul_ternary(w, x.i8.data(), x.scale.data(), n_tokens, y, r0, r1);
    });
    kernels_used_.insert("matmul_w2a8_scalar");
  } else {
    BITNET_CHECK(!w.is_ternary());
    pool_.parallel_for(w.n_rows, min_chunk(w.n_cols * n_tokens, 16), [&](int64_t r0, int64_t r1) {
      matmul_float(w, x.f32.data(), n_tokens, y, r0, r1);
    });
    kernels_used_.insert(fmt::format("matmul_{}_scalar", ggml_type_name(w.type)));
  }
}

void CpuBackend::attention(const hal::Graph& graph, const hal::Op& op) {
  const hal::AttentionParams& p = graph.attn;
  const float* q = acts_[static_cast<size_t>(op.a)].f32.data();
  float* out = acts_[static_cast<size_t>(op.dst)].f32.data();
  const int64_t n_embd = static_cast<int64_t>(p.n_head) * p.head_dim;
  const int32_t group = p.n_head / p.n_head_kv;  // query heads per kv head (GQA)
  const float* k_cache = kv_row(k_cache_, op.il, 0);
  const float* v_cache = kv_row(v_cache_, op.il, 0);
  const int64_t work = (graph.pos0 + graph.n_tokens) * p.head_dim * 2;  // per (token, head), at most
  pool_.parallel_for(graph.n_tokens * p.n_head, min_chunk(work), [&](int64_t i0, int64_t i1) {
    std::vector<float> scores(static_cast<size_t>(graph.pos0 + graph.n_tokens));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / p.n_head;
      const int32_t h = static_cast<int32_t>(i % p.n_head);
      const int64_t kv_off = static_cast<int64_t>(h / group) * p.head_dim;
      attention_head(q + t * n_embd + h * p.head_dim, k_cache, v_cache, graph.pos0 + t + 1,
                     kv_.n_embd_kv, kv_off, p.head_dim, p.kq_scale, scores.data(),
                     out + t * n_embd + h * p.head_dim);
    }
  });
  kernels_used_.insert("attention_f32_scalar");
}

}  // namespace

Result<std::string> resolve_cpu_isa(std::string_view requested) {
  if (requested.empty() || requested == "scalar") return std::string("scalar");
  return invalid_argument(fmt::format("unknown CPU kernel set '{}' (known: scalar)", requested));
}

std::unique_ptr<hal::Backend> make_cpu_backend(const CpuOptions& options) {
  const int n = options.n_threads > 0 ? options.n_threads : ThreadPool::hardware_threads();
  return std::make_unique<CpuBackend>(n);
}

}  // namespace bitnet::cpu
