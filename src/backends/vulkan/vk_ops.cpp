// Recording one op of the list: checks its shapes against the HAL's contract, then one
// dispatch per weight chunk (or a transfer for the pure copies store_kv and copy_rows).
#include <fmt/format.h>

#include <cstring>

#include "backends/vulkan/vk_backend_impl.h"

namespace bitnet::vulkan {

namespace {

constexpr uint32_t kMaxGroups = 65535;
constexpr uint32_t kTokenTile = 4;
constexpr int32_t kMaxHeadDim = 256;

uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }
uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }
uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

Kernel float_kernel(DeviceFormat f, bool embed) {
  switch (f) {
    case DeviceFormat::kF16: return embed ? Kernel::kEmbedF16 : Kernel::kMatmulF16;
    case DeviceFormat::kBF16: return embed ? Kernel::kEmbedBF16 : Kernel::kMatmulBF16;
    case DeviceFormat::kQ8_0: return embed ? Kernel::kEmbedQ8_0 : Kernel::kMatmulQ8_0;
    case DeviceFormat::kQ4_0: return embed ? Kernel::kEmbedQ4_0 : Kernel::kMatmulQ4_0;
    case DeviceFormat::kQ4_1: return embed ? Kernel::kEmbedQ4_1 : Kernel::kMatmulQ4_1;
    case DeviceFormat::kQ5_0: return embed ? Kernel::kEmbedQ5_0 : Kernel::kMatmulQ5_0;
    case DeviceFormat::kQ5_1: return embed ? Kernel::kEmbedQ5_1 : Kernel::kMatmulQ5_1;
    case DeviceFormat::kQ2_K: return embed ? Kernel::kEmbedQ2_K : Kernel::kMatmulQ2_K;
    case DeviceFormat::kQ3_K: return embed ? Kernel::kEmbedQ3_K : Kernel::kMatmulQ3_K;
    case DeviceFormat::kQ4_K: return embed ? Kernel::kEmbedQ4_K : Kernel::kMatmulQ4_K;
    case DeviceFormat::kQ5_K: return embed ? Kernel::kEmbedQ5_K : Kernel::kMatmulQ5_K;
    case DeviceFormat::kQ6_K: return embed ? Kernel::kEmbedQ6_K : Kernel::kMatmulQ6_K;
    case DeviceFormat::kIQ4_NL: return embed ? Kernel::kEmbedIQ4_NL : Kernel::kMatmulIQ4_NL;
    case DeviceFormat::kIQ4_XS: return embed ? Kernel::kEmbedIQ4_XS : Kernel::kMatmulIQ4_XS;
    default: return embed ? Kernel::kEmbedF32 : Kernel::kMatmulF32;
  }
}

Status shape_error(const hal::Op& op, std::string_view what) {
  return invalid_argument(fmt::format("{}: {}", hal::op_name(op.kind), what));
}

}  // namespace

std::optional<QuantDotKernels> quant_dot_kernels(DeviceFormat f) {
  switch (f) {
    case DeviceFormat::kQ4_0: return QuantDotKernels{Kernel::kQuantizeQ8_0, Kernel::kMatmulIntQ4_0, Kernel::kMatmulDotQ4_0, 32};
    case DeviceFormat::kQ4_1: return QuantDotKernels{Kernel::kQuantizeQ8_1, Kernel::kMatmulIntQ4_1, Kernel::kMatmulDotQ4_1, 32};
    case DeviceFormat::kQ5_0: return QuantDotKernels{Kernel::kQuantizeQ8_0, Kernel::kMatmulIntQ5_0, Kernel::kMatmulDotQ5_0, 32};
    case DeviceFormat::kQ5_1: return QuantDotKernels{Kernel::kQuantizeQ8_1, Kernel::kMatmulIntQ5_1, Kernel::kMatmulDotQ5_1, 32};
    case DeviceFormat::kQ8_0: return QuantDotKernels{Kernel::kQuantizeQ8_0, Kernel::kMatmulIntQ8_0, Kernel::kMatmulDotQ8_0, 32};
    case DeviceFormat::kQ2_K: return QuantDotKernels{Kernel::kQuantizeQ8_K, Kernel::kMatmulIntQ2_K, Kernel::kMatmulDotQ2_K, 256};
    case DeviceFormat::kQ3_K: return QuantDotKernels{Kernel::kQuantizeQ8_K, Kernel::kMatmulIntQ3_K, Kernel::kMatmulDotQ3_K, 256};
    case DeviceFormat::kIQ4_NL: return QuantDotKernels{Kernel::kQuantizeQ8_0, Kernel::kMatmulIntIQ4_NL, Kernel::kMatmulDotIQ4_NL, 32};
    case DeviceFormat::kIQ4_XS: return QuantDotKernels{Kernel::kQuantizeQ8_K, Kernel::kMatmulIntIQ4_XS, Kernel::kMatmulDotIQ4_XS, 256};
    case DeviceFormat::kQ4_K: return QuantDotKernels{Kernel::kQuantizeQ8_K, Kernel::kMatmulIntQ4_K, Kernel::kMatmulDotQ4_K, 256};
    case DeviceFormat::kQ5_K: return QuantDotKernels{Kernel::kQuantizeQ8_K, Kernel::kMatmulIntQ5_K, Kernel::kMatmulDotQ5_K, 256};
    case DeviceFormat::kQ6_K: return QuantDotKernels{Kernel::kQuantizeQ8_K, Kernel::kMatmulIntQ6_K, Kernel::kMatmulDotQ6_K, 256};
    default: return std::nullopt;
  }
}

bool VulkanBackend::use_quant_dot(const DeviceWeight& w, const hal::ActDesc& x) const {
  const std::optional<QuantDotKernels> k = quant_dot_kernels(w.format);
  if (!quant_dot_ || !k || x.type != hal::ActType::kF32 || w.n_cols % k->block != 0) return false;
  const auto q_bytes = static_cast<uint64_t>(x.n_rows) * static_cast<uint64_t>(x.n_cols);
  return q_bytes <= max_binding_bytes_;  // the meta words are a quarter of that
}

Status VulkanBackend::record_op(VkCommandBuffer cb, const hal::Graph& graph, const hal::Op& op) {
  const auto desc = [&](hal::ActId id) -> const hal::ActDesc& { return graph.acts[static_cast<size_t>(id)]; };
  const auto act = [&](hal::ActId id) -> DeviceAct& { return acts_[static_cast<size_t>(id)]; };
  const auto is_f32 = [&](hal::ActId id) { return desc(id).type == hal::ActType::kF32; };
  const auto same_shape = [&](hal::ActId x, hal::ActId y) {
    return desc(x).n_rows == desc(y).n_rows && desc(x).n_cols == desc(y).n_cols;
  };
  switch (op.kind) {
    case hal::OpKind::kEmbed: {
      const DeviceWeight& w = weight(op.w);
      const hal::ActDesc& d = desc(op.dst);
      if (w.format == DeviceFormat::kTernary) return unsupported("a ternary token embedding is not supported");
      if (!is_f32(op.dst) || d.n_cols != w.n_cols || d.n_rows != graph.n_tokens) return shape_error(op, "dst is not [n_tokens][row]");
      for (const WeightChunk& c : w.chunks) {
        const uint32_t push[] = {u32(w.n_cols), u32(c.row0), u32(c.n_rows)};
        BITNET_RETURN_IF_ERROR(dispatch(cb, float_kernel(w.format, true),
                                        {bind(c.data), bind(c.scales ? c.scales : dummy_), bind(tokens_), bind(act(op.dst).f32)},
                                        push, sizeof(push), u32(graph.n_tokens)));
      }
      return {};
    }
    case hal::OpKind::kRmsNorm: {
      const DeviceWeight& w = weight(op.w);
      const hal::ActDesc& d = desc(op.dst);
      // Per-head slices (n_head > 0) are rows of their own: the slices of a row are contiguous.
      const int64_t slices = op.n_head > 0 ? op.n_head : 1;
      if (d.n_cols % slices != 0 || w.format != DeviceFormat::kF32 || w.n_rows != 1 || w.n_cols != d.n_cols / slices) {
        return shape_error(op, "the gain is not one row (slice) of n_cols");
      }
      if (!is_f32(op.a) || !is_f32(op.dst) || !same_shape(op.a, op.dst)) return shape_error(op, "a and dst differ");
      const uint32_t push[] = {u32(d.n_cols / slices), f32_bits(op.eps)};
      return dispatch(cb, Kernel::kRmsNorm, {bind(act(op.a).f32), bind(w.chunks[0].data), bind(act(op.dst).f32)},
                      push, sizeof(push), u32(d.n_rows * slices));
    }
    case hal::OpKind::kQuantizeAct: {
      const hal::ActDesc& d = desc(op.dst);
      if (d.type != hal::ActType::kQ8 || !is_f32(op.a) || !same_shape(op.a, op.dst)) return shape_error(op, "needs F32 a and Q8 dst of one shape");
      const uint32_t push[] = {u32(d.n_cols)};
      const DeviceAct& q = act(op.dst);
      return dispatch(cb, Kernel::kQuantizeAct, {bind(act(op.a).f32), bind(q.q), bind(q.scale)}, push, sizeof(push), u32(d.n_rows));
    }
    case hal::OpKind::kMatmul:
      return record_matmul(cb, graph, op);
    case hal::OpKind::kScale: {
      const DeviceWeight& w = weight(op.w);
      const hal::ActDesc& d = desc(op.dst);
      if (w.format != DeviceFormat::kF32 || w.n_rows != 1 || !is_f32(op.dst)) return shape_error(op, "needs a float scale and F32 dst");
      const uint64_t n = static_cast<uint64_t>(d.n_rows * d.n_cols);
      const uint32_t push[] = {u32(static_cast<int64_t>(n))};
      const uint32_t groups = ceil_div(n, 256);
      const uint32_t gx = std::min(groups, kMaxGroups);
      return dispatch(cb, Kernel::kScale, {bind(act(op.dst).f32), bind(w.chunks[0].data), bind(act(op.dst).f32)},
                      push, sizeof(push), gx, ceil_div(groups, gx));
    }
    case hal::OpKind::kBias: {
      const DeviceWeight& w = weight(op.w);
      const hal::ActDesc& d = desc(op.dst);
      if (w.format != DeviceFormat::kF32 || w.n_rows != 1 || w.n_cols != d.n_cols || !is_f32(op.dst)) {
        return shape_error(op, "needs a float bias of one row and F32 dst");
      }
      const uint64_t n = static_cast<uint64_t>(d.n_rows * d.n_cols);
      const uint32_t push[] = {u32(static_cast<int64_t>(n)), u32(d.n_cols)};
      const uint32_t groups = ceil_div(n, 256);
      const uint32_t gx = std::min(groups, kMaxGroups);
      return dispatch(cb, Kernel::kBias, {bind(act(op.dst).f32), bind(w.chunks[0].data), bind(act(op.dst).f32)},
                      push, sizeof(push), gx, ceil_div(groups, gx));
    }
    case hal::OpKind::kRope: {
      const hal::ActDesc& d = desc(op.dst);
      const hal::RopeParams& rp = graph.rope;
      const int32_t head_dim = graph.attn.head_dim;
      if (!is_f32(op.dst) || d.n_rows != graph.n_tokens || static_cast<int64_t>(op.n_head) * head_dim > d.n_cols) {
        return shape_error(op, "dst does not hold n_head heads per token");
      }
      const uint32_t push[] = {u32(d.n_cols), u32(op.n_head), u32(head_dim), u32(rp.n_rot),
                               rp.style == hal::RopeStyle::kNeox ? 1u : 0u, u32(d.n_rows)};
      const uint64_t n = static_cast<uint64_t>(d.n_rows) * static_cast<uint64_t>(op.n_head) * static_cast<uint64_t>(rp.n_rot / 2);
      BITNET_RETURN_IF_ERROR(dispatch(cb, Kernel::kRope, {bind(act(op.dst).f32), bind(rope_table_)}, push, sizeof(push), ceil_div(n, 64)));
      kernels_used_.insert(rp.style == hal::RopeStyle::kNeox ? "vulkan:rope_neox" : "vulkan:rope_norm");
      return {};
    }
    case hal::OpKind::kStoreKv: {
      const hal::ActDesc& k = desc(op.a);
      if (!is_f32(op.a) || !is_f32(op.b) || !same_shape(op.a, op.b) || k.n_cols != kv_.n_embd_kv || k.n_rows != graph.n_tokens) {
        return shape_error(op, "K and V must be [n_tokens][n_embd_kv]");
      }
      // One copy region per run of tokens whose cache rows follow on (one run for a sequence
      // within a block).
      const uint64_t row_bytes = static_cast<uint64_t>(kv_.n_embd_kv) * 4;
      std::vector<VkBufferCopy> regions;
      for (int64_t t = 0; t < k.n_rows; ++t) {
        const auto row = static_cast<uint64_t>(kv_rows_.row(t, kv_rows_.pos[static_cast<size_t>(t)]));
        if (!regions.empty() && regions.back().srcOffset + regions.back().size == static_cast<uint64_t>(t) * row_bytes &&
            regions.back().dstOffset + regions.back().size == row * row_bytes) {
          regions.back().size += row_bytes;
        } else {
          regions.push_back({static_cast<uint64_t>(t) * row_bytes, row * row_bytes, row_bytes});
        }
      }
      const auto n_regions = static_cast<uint32_t>(regions.size());
      vkCmdCopyBuffer(cb, act(op.a).f32.handle(), k_cache_[static_cast<size_t>(op.il)].handle(), n_regions, regions.data());
      vkCmdCopyBuffer(cb, act(op.b).f32.handle(), v_cache_[static_cast<size_t>(op.il)].handle(), n_regions, regions.data());
      kernels_used_.insert("vulkan:store_kv");
      return {};
    }
    case hal::OpKind::kAttention: {
      const hal::AttentionParams& p = graph.attn;
      const hal::ActDesc& d = desc(op.dst);
      if (p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.head_dim <= 0) {
        return shape_error(op, "heads must be a positive multiple of the KV heads");
      }
      if (p.head_dim > kMaxHeadDim) return unsupported(fmt::format("attention: head_dim {} > {}", p.head_dim, kMaxHeadDim));
      if (static_cast<int64_t>(p.n_head_kv) * p.head_dim > kv_.n_embd_kv) return shape_error(op, "KV heads exceed the cache rows");
      if (!is_f32(op.a) || !is_f32(op.dst) || !same_shape(op.a, op.dst) || d.n_rows != graph.n_tokens ||
          d.n_cols != static_cast<int64_t>(p.n_head) * p.head_dim) {
        return shape_error(op, "q and dst must be [n_tokens][n_head * head_dim]");
      }
      const uint32_t push[] = {u32(p.n_head), u32(p.n_head_kv), u32(p.head_dim), u32(kv_.n_embd_kv),
                               u32(graph.n_tokens), u32(kv_rows_.block_size), f32_bits(p.kq_scale)};
      const size_t il = static_cast<size_t>(op.il);
      return dispatch(cb, Kernel::kAttention,
                      {bind(act(op.a).f32), bind(k_cache_[il]), bind(v_cache_[il]), bind(act(op.dst).f32), bind(kv_map_)},
                      push, sizeof(push), u32(d.n_rows * p.n_head));
    }
    case hal::OpKind::kSiluMul:
    case hal::OpKind::kRelu2Mul:
    case hal::OpKind::kAdd: {
      const hal::ActDesc& d = desc(op.dst);
      if (!is_f32(op.a) || !is_f32(op.b) || !is_f32(op.dst) || !same_shape(op.a, op.dst) || !same_shape(op.b, op.dst)) {
        return shape_error(op, "a, b and dst must be F32 of one shape");
      }
      const Kernel k = op.kind == hal::OpKind::kAdd ? Kernel::kAdd : op.kind == hal::OpKind::kSiluMul ? Kernel::kSiluMul : Kernel::kRelu2Mul;
      const uint64_t n = static_cast<uint64_t>(d.n_rows * d.n_cols);
      const uint32_t push[] = {u32(static_cast<int64_t>(n))};
      const uint32_t groups = ceil_div(n, 256);
      const uint32_t gx = std::min(groups, kMaxGroups);
      return dispatch(cb, k, {bind(act(op.a).f32), bind(act(op.b).f32), bind(act(op.dst).f32)}, push, sizeof(push), gx,
                      ceil_div(groups, gx));
    }
    case hal::OpKind::kGetRows: {
      const hal::ActDesc& d = desc(op.dst);
      const hal::ActDesc& s = desc(op.a);
      if (!is_f32(op.a) || !is_f32(op.dst) || d.n_cols != s.n_cols || static_cast<int64_t>(graph.get_rows.size()) != d.n_rows) {
        return shape_error(op, "rows outside the source");
      }
      const uint64_t row_bytes = static_cast<uint64_t>(d.n_cols) * 4;
      std::vector<VkBufferCopy> regions;
      for (int64_t i = 0; i < d.n_rows; ++i) {
        const int32_t r = graph.get_rows[static_cast<size_t>(i)];
        if (r < 0 || r >= s.n_rows) return shape_error(op, "rows outside the source");
        regions.push_back({static_cast<uint64_t>(r) * row_bytes, static_cast<uint64_t>(i) * row_bytes, row_bytes});
      }
      if (!regions.empty()) {
        vkCmdCopyBuffer(cb, act(op.a).f32.handle(), act(op.dst).f32.handle(), static_cast<uint32_t>(regions.size()), regions.data());
      }
      kernels_used_.insert("vulkan:get_rows");
      return {};
    }
    case hal::OpKind::kCopyRows: {
      const hal::ActDesc& d = desc(op.dst);
      const hal::ActDesc& s = desc(op.a);
      if (!is_f32(op.a) || !is_f32(op.dst) || d.n_cols != s.n_cols || op.row0 < 0 || op.row0 + d.n_rows > s.n_rows) {
        return shape_error(op, "rows outside the source");
      }
      const uint64_t row_bytes = static_cast<uint64_t>(d.n_cols) * 4;
      const VkBufferCopy region{static_cast<uint64_t>(op.row0) * row_bytes, 0, static_cast<uint64_t>(d.n_rows) * row_bytes};
      if (region.size > 0) vkCmdCopyBuffer(cb, act(op.a).f32.handle(), act(op.dst).f32.handle(), 1, &region);
      kernels_used_.insert("vulkan:copy_rows");
      return {};
    }
  }
  return internal_error("unknown op");
}

Status VulkanBackend::record_matmul(VkCommandBuffer cb, const hal::Graph& graph, const hal::Op& op) {
  const DeviceWeight& w = weight(op.w);
  const hal::ActDesc& x = graph.acts[static_cast<size_t>(op.a)];
  const hal::ActDesc& y = graph.acts[static_cast<size_t>(op.dst)];
  const bool ternary = w.format == DeviceFormat::kTernary;
  if (x.type == hal::ActType::kQ8 && !ternary) {
    return unsupported(fmt::format("matmul: int8 activations with a {} weight", ggml_type_name(w.type)));
  }
  if (x.type == hal::ActType::kF32 && ternary) {
    return unsupported(fmt::format("matmul: float activations with a ternary {} weight (quantize_act first)", ggml_type_name(w.type)));
  }
  if (x.n_cols != w.n_cols || y.type != hal::ActType::kF32 || y.n_cols != w.n_rows || y.n_rows != x.n_rows) {
    return invalid_argument(fmt::format("matmul: [{}][{}] x weight [{}][{}] -> [{}][{}]", x.n_rows, x.n_cols, w.n_rows,
                                        w.n_cols, y.n_rows, y.n_cols));
  }
  const DeviceAct& xa = acts_[static_cast<size_t>(op.a)];
  const bool quant = use_quant_dot(w, x);
  std::optional<QuantDotKernels> qk;
  if (quant) {
    // The activations quantized once for every chunk and token window, then a barrier.
    qk = quant_dot_kernels(w.format);
    const uint64_t n_blocks = static_cast<uint64_t>(x.n_rows * x.n_cols / qk->block);
    const uint32_t groups = ceil_div(n_blocks, 64);
    const uint32_t gx = std::min(groups, kMaxGroups);
    const uint32_t push[] = {u32(static_cast<int64_t>(n_blocks))};
    BITNET_RETURN_IF_ERROR(dispatch(cb, qk->quantize, {bind(xa.f32), bind(q8_q_), bind(q8_meta_)}, push, sizeof(push), gx,
                                    ceil_div(groups, gx)));
    full_barrier(cb);
  }
  const Buffer& yb = acts_[static_cast<size_t>(op.dst)].f32;
  // dst windows of at most one binding, split by tokens (the all-rows logits of a large
  // vocabulary): the window starts at an aligned offset at or before its first token.
  const uint64_t row_bytes = static_cast<uint64_t>(y.n_cols) * 4;
  const uint64_t align = std::max<uint64_t>(4, ctx_->offset_alignment());
  const uint64_t window = max_binding_bytes_ - align;
  if (row_bytes > window) return unsupported(fmt::format("matmul: an output row of {} bytes exceeds one binding", row_bytes));
  const int64_t tokens_per_window = static_cast<int64_t>(window / row_bytes);
  for (int64_t t_base = 0; t_base < y.n_rows; t_base += tokens_per_window) {
    const int64_t nt = std::min(tokens_per_window, y.n_rows - t_base);
    const uint64_t offset = static_cast<uint64_t>(t_base) * row_bytes;
    const uint64_t start = offset / align * align;
    const Binding yw{yb.handle(), start, std::min<uint64_t>(yb.size() - start, max_binding_bytes_)};
    const uint32_t y_offset = static_cast<uint32_t>((offset - start) / 4);
    for (const WeightChunk& c : w.chunks) {
      const uint32_t groups_x = ceil_div(static_cast<uint64_t>(c.n_rows), 64);  // one invocation per row
      const uint32_t groups_y = ceil_div(static_cast<uint64_t>(nt), kTokenTile);
      if (ternary) {
        const uint32_t push[] = {u32(w.n_cols), u32(c.n_rows), u32(c.row0), u32(y.n_cols),
                                 u32(nt), u32(w.scale_block), u32(t_base), y_offset};
        BITNET_RETURN_IF_ERROR(dispatch(cb, ctx_->int8_dot() ? Kernel::kMatmulW2A8Dot : Kernel::kMatmulW2A8, {bind(c.data), bind(c.scales), bind(xa.q), bind(xa.scale), yw},
                                        push, sizeof(push), groups_x, groups_y));
      } else if (quant) {
        const uint32_t push[] = {u32(w.n_cols), u32(c.n_rows), u32(c.row0), u32(y.n_cols), u32(nt), u32(t_base), y_offset};
        BITNET_RETURN_IF_ERROR(dispatch(cb, ctx_->int8_dot() ? qk->matmul_dot : qk->matmul_int,
                                        {bind(c.data), bind(c.scales ? c.scales : dummy_), bind(q8_q_), bind(q8_meta_), yw},
                                        push, sizeof(push), groups_x, groups_y));
      } else {
        const uint32_t push[] = {u32(w.n_cols), u32(c.n_rows), u32(c.row0), u32(y.n_cols), u32(nt), u32(t_base), y_offset};
        BITNET_RETURN_IF_ERROR(dispatch(cb, float_kernel(w.format, false),
                                        {bind(c.data), bind(c.scales ? c.scales : dummy_), bind(xa.f32), yw},
                                        push, sizeof(push), groups_x, groups_y));
      }
    }
  }
  return {};
}

}  // namespace bitnet::vulkan
