// One op of the list as kernel launches on the backend's stream (the kernel chosen by
// plan_graph; shapes already checked by hal::validate_graph and plan_graph).
#include <fmt/format.h>

#include "backends/cuda/cuda_backend_impl.h"

namespace bitnet::cuda {

namespace {

Status launched(GpuError e, Kernel k) { return cuda_status(e, kernel_name(k)); }

}  // namespace

Status CudaBackend::launch_fused(const hal::Graph& graph, size_t i, Kernel kernel) {
  // kGateNormQuant and kAddNormQuant: ops i (gate or add), i + 1 (norm), i + 2 (quantize).
  const bool two_in = kernel != Kernel::kNormQuant;
  const hal::Op& first = graph.ops[i];
  const size_t norm_at = two_in ? i + 1 : i;
  const hal::Op& norm = graph.ops[norm_at];
  const hal::Op& quant = graph.ops[norm_at + 1];
  const hal::ActDesc& d = desc(graph, quant.dst);
  float* normed = fused_writes_normed(graph, i, kernel) ? f32(norm.dst) : nullptr;
  Gate gate = Gate::kNone;
  if (kernel == Kernel::kAddNormQuant) gate = Gate::kAdd;
  if (kernel == Kernel::kGateNormQuant) gate = first.kind == hal::OpKind::kRelu2Mul ? Gate::kRelu2 : Gate::kSilu;
  float* sum = gate == Gate::kAdd ? f32(first.dst) : nullptr;
  return launched(gated_rms_norm_quant(gate, f32(first.a), two_in ? f32(first.b) : nullptr, weight(norm.w).f32(), d.n_rows,
                                       d.n_cols, norm.eps, q8(quant.dst), normed, stream_, sum),
                  kernel);
}

static_assert(kGemvGroupOps <= kGemvGroupMax);

Status CudaBackend::launch_gemv_group(const hal::Graph& graph, size_t i, size_t n) {
  W2cView w[kGemvGroupMax];
  float* y[kGemvGroupMax];
  for (size_t j = 0; j < n; ++j) {
    const hal::Op& op = graph.ops[i + j];
    w[j] = weight(op.w).w2c();
    y[j] = f32(op.dst);
  }
  const hal::Op& first = graph.ops[i];
  return launched(w2a8_gemv_group(w, y, static_cast<int>(n), q8(first.a), desc(graph, first.a).n_rows, stream_),
                  Kernel::kW2a8GemvGroup);
}

Status CudaBackend::launch(const hal::Graph& graph, size_t index, Kernel kernel) {
  const hal::Op& op = graph.ops[index];
  const auto elems = [&](hal::ActId id) { return desc(graph, id).n_rows * desc(graph, id).n_cols; };
  switch (kernel) {
    case Kernel::kEmbed:
      return launched(embed_rows(weight(op.w).float_view(), static_cast<const int32_t*>(cur_->tokens.ptr), graph.n_tokens,
                                 f32(op.dst), stream_), kernel);
    case Kernel::kRmsNorm: {
      const hal::ActDesc& d = desc(graph, op.dst);
      return launched(rms_norm(f32(op.a), weight(op.w).f32(), d.n_rows, d.n_cols, op.n_head, op.eps, f32(op.dst), stream_),
                      kernel);
    }
    case Kernel::kQuantize: {
      const hal::ActDesc& d = desc(graph, op.dst);
      return launched(rms_norm_quant(f32(op.a), nullptr, d.n_rows, d.n_cols, 0.0f, q8(op.dst),
                                     nullptr, stream_), kernel);
    }
    case Kernel::kW2a8Gemv:
    case Kernel::kW2a8Mma:
    case Kernel::kMatmulFloat:
      return launch_matmul(graph, op, kernel);
    case Kernel::kScale:
      return launched(scale_by(f32(op.dst), weight(op.w).f32(), elems(op.dst), stream_), kernel);
    case Kernel::kBias: {
      const hal::ActDesc& d = desc(graph, op.dst);
      return launched(add_row(f32(op.dst), weight(op.w).f32(), d.n_rows, d.n_cols, stream_), kernel);
    }
    case Kernel::kRope: {
      const hal::ActDesc& d = desc(graph, op.dst);
      const hal::RopeParams& rp = graph.rope;
      const int32_t head_dim = graph.attn.head_dim;
      const bool neox = rp.style == hal::RopeStyle::kNeox;
      const auto* table = static_cast<const float*>(cur_->rope.ptr);
      if (d.n_cols == static_cast<int64_t>(op.n_head) * head_dim) {
        return launched(rope(f32(op.dst), table, d.n_rows, op.n_head, head_dim, rp.n_rot, neox, stream_), kernel);
      }
      // Rows wider than the heads (validate_graph allows it): the kernel takes packed heads, so
      // one launch per token, the rest of each row left alone.
      for (int64_t t = 0; t < d.n_rows; ++t) {
        BITNET_RETURN_IF_ERROR(launched(rope(f32(op.dst) + t * d.n_cols, table + t * rp.n_rot, 1, op.n_head, head_dim,
                                             rp.n_rot, neox, stream_), kernel));
      }
      return {};
    }
    case Kernel::kRopeStoreKv: {
      const hal::Op& rk = graph.ops[index + 1];
      const hal::Op& st = graph.ops[index + 2];
      const size_t il = static_cast<size_t>(st.il);
      const hal::RopeParams& rp = graph.rope;
      return launched(rope_store_kv_f16(f32(op.dst), f32(rk.dst), f32(st.b), static_cast<const float*>(cur_->rope.ptr),
                                        graph.n_tokens, op.n_head, rk.n_head, graph.attn.head_dim, rp.n_rot,
                                        rp.style == hal::RopeStyle::kNeox, cur_->kv_rows, k_cache_[il].as<uint16_t>(),
                                        v_cache_[il].as<uint16_t>(), stream_),
                      kernel);
    }
    case Kernel::kStoreKv: {
      const size_t il = static_cast<size_t>(op.il);
      return launched(store_kv_f16(f32(op.a), f32(op.b), desc(graph, op.a).n_rows, kv_.n_embd_kv, cur_->kv_rows,
                                   k_cache_[il].as<uint16_t>(), v_cache_[il].as<uint16_t>(), stream_), kernel);
    }
    case Kernel::kAttention: {
      const size_t il = static_cast<size_t>(op.il);
      return launched(attention_f16(f32(op.a), k_cache_[il].as<const uint16_t>(), v_cache_[il].as<const uint16_t>(),
                                    cur_->kv_rows, cur_->attn_shape, graph.n_tokens, static_cast<float*>(cur_->attn_scratch.ptr),
                                    f32(op.dst), stream_), kernel);
    }
    case Kernel::kSiluMul: return launched(silu_mul(f32(op.a), f32(op.b), elems(op.dst), f32(op.dst), stream_), kernel);
    case Kernel::kRelu2Mul: return launched(relu2_mul(f32(op.a), f32(op.b), elems(op.dst), f32(op.dst), stream_), kernel);
    case Kernel::kAdd: return launched(add(f32(op.a), f32(op.b), elems(op.dst), f32(op.dst), stream_), kernel);
    case Kernel::kCopy: return copy_rows(graph, op);
    case Kernel::kNormQuant:
    case Kernel::kGateNormQuant:
    case Kernel::kAddNormQuant: return launch_fused(graph, index, kernel);
    case Kernel::kW2a8GemvGroup: break;  // launch_all calls launch_gemv_group, which needs the plan
    case Kernel::kFused: return {};
    case Kernel::kTopK: break;  // not an op's kernel: read_top launches it after the op list
  }
  return internal_error(BITNET_GPU_PREFIX " unknown kernel");
}

Status CudaBackend::launch_matmul(const hal::Graph& graph, const hal::Op& op, Kernel kernel) {
  const DeviceWeight& w = weight(op.w);
  const int64_t n_tokens = desc(graph, op.a).n_rows;
  float* y = f32(op.dst);
  switch (kernel) {
    case Kernel::kW2a8Mma:
      return launched(w2a8_gemm_mma(w.w2c(), q8(op.a), n_tokens, y, mma_cc_major(), stream_), kernel);
    case Kernel::kW2a8Gemv:
      return launched(w2a8_gemv(w.w2c(), q8(op.a), n_tokens, y, stream_), kernel);
    default:
      return launched(matmul_float(w.float_view(), f32(op.a), n_tokens, y, stream_), kernel);
  }
}

Status CudaBackend::copy_rows(const hal::Graph& graph, const hal::Op& op) {
  const hal::ActDesc& d = desc(graph, op.dst);
  const uint64_t row_bytes = static_cast<uint64_t>(d.n_cols) * 4;
  const auto copy = [&](int64_t src_row, int64_t dst_row, int64_t n) {
    return cuda_status(cudaMemcpyAsync(f32(op.dst) + dst_row * d.n_cols, f32(op.a) + src_row * d.n_cols,
                                       static_cast<uint64_t>(n) * row_bytes, cudaMemcpyDeviceToDevice, stream_),
                       "cudaMemcpyAsync of rows");
  };
  if (op.kind == hal::OpKind::kCopyRows) return d.n_rows > 0 ? copy(op.row0, 0, d.n_rows) : Status{};
  // get_rows: one copy per run of consecutive source rows.
  int64_t i = 0;
  while (i < d.n_rows) {
    const int32_t first = graph.get_rows[static_cast<size_t>(i)];
    int64_t n = 1;
    while (i + n < d.n_rows && graph.get_rows[static_cast<size_t>(i + n)] == first + n) ++n;
    BITNET_RETURN_IF_ERROR(copy(first, i, n));
    i += n;
  }
  return {};
}

}  // namespace bitnet::cuda
