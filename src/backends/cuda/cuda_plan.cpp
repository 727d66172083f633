#include "backends/cuda/cuda_plan.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>

#include "quant/quant.h"

namespace bitnet::cuda {

namespace {

constexpr int64_t kChunk = 64;      // W2A8 columns per 16-byte chunk (w2a8_math.h kChunkCols)
constexpr uint64_t kAlign = 256;

uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

Status refuse(size_t index, const hal::Op& op, std::string_view why) {
  return unsupported(fmt::format(BITNET_GPU_PREFIX " op {} ({}): {}", index, hal::op_name(op.kind), why));
}

}  // namespace

std::string_view kernel_name(Kernel k) {
  switch (k) {
    case Kernel::kEmbed: return BITNET_GPU_PREFIX "embed_rows";
    case Kernel::kRmsNorm: return BITNET_GPU_PREFIX "rms_norm";
    case Kernel::kQuantize: return BITNET_GPU_PREFIX "rms_norm_quant";
    case Kernel::kW2a8Gemv: return BITNET_GPU_PREFIX "w2a8_gemv";
    case Kernel::kW2a8Mma: return BITNET_GPU_PREFIX "w2a8_gemm_mma";
    case Kernel::kMatmulFloat: return BITNET_GPU_PREFIX "matmul_float";
    case Kernel::kScale: return BITNET_GPU_PREFIX "scale_by";
    case Kernel::kBias: return BITNET_GPU_PREFIX "add_row";
    case Kernel::kRope: return BITNET_GPU_PREFIX "rope";
    case Kernel::kStoreKv: return BITNET_GPU_PREFIX "store_kv_f16";
    case Kernel::kAttention: return BITNET_GPU_PREFIX "attention_f16";
    case Kernel::kSiluMul: return BITNET_GPU_PREFIX "silu_mul";
    case Kernel::kRelu2Mul: return BITNET_GPU_PREFIX "relu2_mul";
    case Kernel::kAdd: return BITNET_GPU_PREFIX "add";
    case Kernel::kCopy: return BITNET_GPU_PREFIX "copy";
    case Kernel::kTopK: return BITNET_GPU_PREFIX "top_k_rows";
    case Kernel::kNormQuant: return BITNET_GPU_PREFIX "rms_norm_quant";
    case Kernel::kGateNormQuant: return BITNET_GPU_PREFIX "gated_rms_norm_quant";
    case Kernel::kAddNormQuant: return BITNET_GPU_PREFIX "add_rms_norm_quant";
    case Kernel::kW2a8GemvGroup: return BITNET_GPU_PREFIX "w2a8_gemv_group";
    case Kernel::kRopeStoreKv: return BITNET_GPU_PREFIX "rope_store_kv_f16";
    case Kernel::kFused: return BITNET_GPU_PREFIX "fused";
  }
  return BITNET_GPU_PREFIX "unknown";
}

std::optional<BlockFormat> block_format_of(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return BlockFormat::kQ4_0;
    case GgmlType::kQ4_1: return BlockFormat::kQ4_1;
    case GgmlType::kQ5_0: return BlockFormat::kQ5_0;
    case GgmlType::kQ5_1: return BlockFormat::kQ5_1;
    case GgmlType::kQ2_K: return BlockFormat::kQ2_K;
    case GgmlType::kQ3_K: return BlockFormat::kQ3_K;
    case GgmlType::kQ4_K: return BlockFormat::kQ4_K;
    case GgmlType::kQ5_K: return BlockFormat::kQ5_K;
    case GgmlType::kQ6_K: return BlockFormat::kQ6_K;
    case GgmlType::kIQ4_NL: return BlockFormat::kIQ4_NL;
    case GgmlType::kIQ4_XS: return BlockFormat::kIQ4_XS;
    default: return std::nullopt;
  }
}

Result<WeightKind> weight_kind(std::string_view name, GgmlType type, int64_t n_cols, int64_t n_rows) {
  if (n_cols <= 0 || n_rows <= 0) return invalid_argument(fmt::format("tensor {} is empty", name));
  if (quant::is_ternary(type)) {
    if (n_cols % kChunk != 0) {
      return unsupported(fmt::format(BITNET_GPU_PREFIX " ternary tensor {} has rows of {} elements, not a multiple of {}", name,
                                     n_cols, kChunk));
    }
    return WeightKind::kTernary;
  }
  if (n_rows == 1) {
    if (type == GgmlType::kF32 || quant::can_dequantize(type)) return WeightKind::kF32;
    return unsupported(fmt::format(BITNET_GPU_PREFIX " tensor {} of type {} is not supported", name, ggml_type_name(type)));
  }
  if (const std::optional<BlockFormat> b = block_format_of(type)) {
    if (n_cols % block_elems(*b) != 0) {
      return corrupt_file(fmt::format("{} tensor {} has rows of {} elements", ggml_type_name(type), name, n_cols));
    }
    return WeightKind::kBlocks;
  }
  WeightKind kind;
  switch (type) {
    case GgmlType::kF32: kind = WeightKind::kF32; break;
    case GgmlType::kF16: kind = WeightKind::kF16; break;
    case GgmlType::kBF16: kind = WeightKind::kBF16; break;
    case GgmlType::kQ8_0: kind = WeightKind::kQ8_0; break;
    default:
      return unsupported(fmt::format(BITNET_GPU_PREFIX " tensor {} of type {} is not supported (ternary, F32, F16, BF16, Q8_0, "
                                     "Q4_0, Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS)",
                                     name, ggml_type_name(type)));
  }
  if (kind == WeightKind::kQ8_0 && n_cols % 32 != 0) {
    return corrupt_file(fmt::format("Q8_0 tensor {} has rows of {} elements", name, n_cols));
  }
  return kind;
}

Kernel choose_ternary_kernel(int64_t n_tokens, int cc_major, int64_t n_cols, int64_t scale_block) {
  const bool mma_ok = cc_major >= 8 && n_cols % 32 == 0 && scale_block % 32 == 0;
  return n_tokens > kGemvMaxTokens && mma_ok ? Kernel::kW2a8Mma : Kernel::kW2a8Gemv;
}

Result<ActLayout> act_layout(const hal::ActDesc& d) {
  if (d.n_rows <= 0 || d.n_cols <= 0) return internal_error(fmt::format("activation {} is empty", d.name));
  const auto rows = static_cast<uint64_t>(d.n_rows), cols = static_cast<uint64_t>(d.n_cols);
  ActLayout l;
  if (d.type == hal::ActType::kF32) {
    l.bytes = rows * cols * 4;
    return l;
  }
  if (d.n_cols % kChunk != 0) {
    return unsupported(fmt::format(BITNET_GPU_PREFIX " int8 activation {} has rows of {}, not a multiple of {}", d.name, d.n_cols, kChunk));
  }
  l.scale_offset = align_up(rows * cols);
  l.sum_offset = align_up(l.scale_offset + rows * 4);
  l.bytes = l.sum_offset + rows * (cols / kChunk) * 4;
  return l;
}

Result<std::vector<ActLayout>> act_layouts(const hal::Graph& graph) {
  std::vector<bool> used(graph.acts.size(), false);
  const auto mark = [&](hal::ActId id) {
    if (id != hal::kNone && static_cast<size_t>(id) < used.size()) used[static_cast<size_t>(id)] = true;
  };
  for (const hal::Op& op : graph.ops) {
    mark(op.dst);
    mark(op.a);
    mark(op.b);
  }
  mark(graph.logits);
  std::vector<ActLayout> layouts(graph.acts.size());
  for (size_t i = 0; i < graph.acts.size(); ++i) {
    if (!used[i]) continue;
    BITNET_ASSIGN_OR_RETURN(layouts[i], act_layout(graph.acts[i]));
  }
  return layouts;
}

bool read_later(const hal::Graph& g, size_t from, hal::ActId id) {
  for (size_t k = from; k < g.ops.size(); ++k) {
    const hal::Op& op = g.ops[k];
    if (op.a == id || op.b == id) return true;
    if (op.dst != id) continue;
    switch (op.kind) {
      case hal::OpKind::kScale:
      case hal::OpKind::kBias:
      case hal::OpKind::kRope:
        return true;  // in place: reads dst
      default:
        return false;  // rewritten whole
    }
  }
  return id == g.logits;
}

bool fused_normed(const hal::Graph& g, size_t i, Kernel k) {
  const hal::Op& first = g.ops[i];
  const hal::Op& norm = k == Kernel::kGateNormQuant ? g.ops[i + 1] : first;
  const hal::ActId inputs[2] = {first.a, k == Kernel::kGateNormQuant ? first.b : hal::kNone};
  return norm.dst != inputs[0] && norm.dst != inputs[1];
}

bool fused_writes_normed(const hal::Graph& g, size_t i, Kernel k) {
  return k == Kernel::kAddNormQuant ? fused_normed(g, i + 1, Kernel::kNormQuant) : fused_normed(g, i, k);
}

namespace {

// Fuses what plan_graph's comment says, in place in `plan`.
void fuse_norms(const hal::Graph& g, std::vector<Kernel>& plan) {
  const auto whole_norm_then_quant = [&](size_t j) {
    if (j + 1 >= g.ops.size()) return false;
    const hal::Op& n = g.ops[j];
    const hal::Op& q = g.ops[j + 1];
    return plan[j] == Kernel::kRmsNorm && n.n_head <= 0 && plan[j + 1] == Kernel::kQuantize && q.a == n.dst;
  };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const hal::Op& op = g.ops[i];
    const bool gate = (plan[i] == Kernel::kRelu2Mul || plan[i] == Kernel::kSiluMul) && whole_norm_then_quant(i + 1) &&
                      g.ops[i + 1].a == op.dst;
    if (gate) {
      const hal::ActId h = op.dst, n = g.ops[i + 1].dst;
      // The gate's output is not written: nothing may read it (unless the norm rewrote it).
      const bool h_ok = n == h || !read_later(g, i + 2, h);
      const bool n_ok = fused_normed(g, i, Kernel::kGateNormQuant) || !read_later(g, i + 3, n);
      if (h_ok && n_ok) {
        plan[i] = Kernel::kGateNormQuant;
        plan[i + 1] = plan[i + 2] = Kernel::kFused;
        i += 2;
        continue;
      }
    }
    if (whole_norm_then_quant(i) && (fused_normed(g, i, Kernel::kNormQuant) || !read_later(g, i + 2, op.dst))) {
      plan[i] = Kernel::kNormQuant;
      plan[i + 1] = Kernel::kFused;
      ++i;
    }
  }
}

// The residual add in front of a kNormQuant pair (fuse_norms ran): one kAddNormQuant.
void fuse_adds(const hal::Graph& g, std::vector<Kernel>& plan) {
  for (size_t i = 0; i + 2 < g.ops.size(); ++i) {
    if (plan[i] == Kernel::kAdd && plan[i + 1] == Kernel::kNormQuant && g.ops[i + 1].a == g.ops[i].dst) {
      plan[i] = Kernel::kAddNormQuant;
      plan[i + 1] = Kernel::kFused;  // the quantize at i + 2 is kFused already
      i += 2;
    }
  }
}

// Runs of 2-3 GEMVs of one input into kW2a8GemvGroup: each reads only the shared input and
// its weight, so their order does not matter; outputs are distinct floats (the input is Q8).
void group_gemvs(const hal::Graph& g, std::span<const WeightInfo> weights, std::vector<Kernel>& plan) {
  const auto info = [&](size_t i) -> const WeightInfo& { return weights[static_cast<size_t>(g.ops[i].w)]; };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (plan[i] != Kernel::kW2a8Gemv) continue;
    size_t n = 1;
    while (n < kGemvGroupOps && i + n < g.ops.size() && plan[i + n] == Kernel::kW2a8Gemv &&
           g.ops[i + n].a == g.ops[i].a && info(i + n).n_cols == info(i).n_cols &&
           info(i + n).scale_block == info(i).scale_block) {
      ++n;
    }
    if (n < 2) continue;
    plan[i] = Kernel::kW2a8GemvGroup;
    for (size_t j = 1; j < n; ++j) plan[i + j] = Kernel::kFused;
    i += n - 1;
  }
}

// rope(q), rope(k), store_kv(k, v) with rows of whole heads: one kRopeStoreKv.
void fuse_rope_store(const hal::Graph& g, std::vector<Kernel>& plan) {
  const auto whole_heads = [&](const hal::Op& rope) {
    return g.acts[static_cast<size_t>(rope.dst)].n_cols == static_cast<int64_t>(rope.n_head) * g.attn.head_dim;
  };
  for (size_t i = 0; i + 2 < g.ops.size(); ++i) {
    const hal::Op& rq = g.ops[i];
    const hal::Op& rk = g.ops[i + 1];
    const hal::Op& st = g.ops[i + 2];
    if (plan[i] == Kernel::kRope && plan[i + 1] == Kernel::kRope && plan[i + 2] == Kernel::kStoreKv && st.a == rk.dst &&
        rq.dst != rk.dst && st.b != rq.dst && st.b != rk.dst && whole_heads(rq) && whole_heads(rk)) {
      plan[i] = Kernel::kRopeStoreKv;
      plan[i + 1] = plan[i + 2] = Kernel::kFused;
      i += 2;
    }
  }
}

}  // namespace

size_t gemv_group_size(const std::vector<Kernel>& plan, size_t i) {
  size_t n = 1;
  while (i + n < plan.size() && n < kGemvGroupOps && plan[i + n] == Kernel::kFused) ++n;
  return n;
}

Result<std::vector<Kernel>> plan_graph(const hal::Graph& g, std::span<const WeightInfo> weights, int cc_major, bool fuse) {
  std::vector<Kernel> plan;
  plan.reserve(g.ops.size());
  const auto act = [&](hal::ActId id) -> const hal::ActDesc& { return g.acts[static_cast<size_t>(id)]; };
  const auto weight = [&](hal::WeightId id) -> const WeightInfo& { return weights[static_cast<size_t>(id)]; };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const hal::Op& op = g.ops[i];
    Kernel k = Kernel::kCopy;
    switch (op.kind) {
      case hal::OpKind::kEmbed:
        if (weight(op.w).kind == WeightKind::kTernary) return refuse(i, op, "a ternary token embedding");
        k = Kernel::kEmbed;
        break;
      case hal::OpKind::kRmsNorm:
        if (weight(op.w).kind != WeightKind::kF32 || weight(op.w).n_rows != 1) return refuse(i, op, "the gain is not one float row");
        k = Kernel::kRmsNorm;
        break;
      case hal::OpKind::kQuantizeAct:
        if (act(op.dst).n_cols % kChunk != 0) {
          return refuse(i, op, fmt::format("rows of {}, not a multiple of {}", act(op.dst).n_cols, kChunk));
        }
        k = Kernel::kQuantize;
        break;
      case hal::OpKind::kMatmul: {
        const WeightInfo& w = weight(op.w);
        const bool q8 = act(op.a).type == hal::ActType::kQ8;
        if (q8 != (w.kind == WeightKind::kTernary)) {
          return refuse(i, op, q8 ? "int8 activations with a float weight" : "float activations with a ternary weight");
        }
        if (act(op.a).n_rows > 65535 * 4) return refuse(i, op, fmt::format("{} rows in one product", act(op.a).n_rows));
        k = q8 ? choose_ternary_kernel(act(op.a).n_rows, cc_major, w.n_cols, w.scale_block) : Kernel::kMatmulFloat;
        break;
      }
      case hal::OpKind::kScale:
        if (weight(op.w).kind != WeightKind::kF32) return refuse(i, op, "the scale is not a float");
        k = Kernel::kScale;
        break;
      case hal::OpKind::kBias:
        if (weight(op.w).kind != WeightKind::kF32 || weight(op.w).n_rows != 1) return refuse(i, op, "the bias is not one float row");
        k = Kernel::kBias;
        break;
      case hal::OpKind::kRope: k = Kernel::kRope; break;
      case hal::OpKind::kStoreKv: k = Kernel::kStoreKv; break;
      case hal::OpKind::kAttention:
        if (!attention_head_dim_supported(g.attn.head_dim)) {
          return refuse(i, op, fmt::format("head_dim {} (the kernel takes heads of 1 to {})", g.attn.head_dim,
                                           kMaxAttentionHeadDim));
        }
        if (g.n_tokens > 65535) return refuse(i, op, fmt::format("{} tokens in one step", g.n_tokens));
        k = Kernel::kAttention;
        break;
      case hal::OpKind::kSiluMul: k = Kernel::kSiluMul; break;
      case hal::OpKind::kRelu2Mul: k = Kernel::kRelu2Mul; break;
      case hal::OpKind::kAdd: k = Kernel::kAdd; break;
      case hal::OpKind::kCopyRows:
      case hal::OpKind::kGetRows: k = Kernel::kCopy; break;
    }
    plan.push_back(k);
  }
  if (fuse) {
    fuse_norms(g, plan);
    fuse_adds(g, plan);
    group_gemvs(g, weights, plan);
    fuse_rope_store(g, plan);
  }
  return plan;
}

Result<KvAddressing> kv_addressing(const hal::Graph& graph, const hal::KvRows& rows) {
  KvAddressing a;
  if (graph.kv.pos.empty()) return a;  // one sequence from row 0: row = position
  const int64_t block = rows.block_size;
  if (block > 0 && std::has_single_bit(static_cast<uint64_t>(block))) {
    a.identity = false;
    a.block_shift = std::countr_zero(static_cast<uint64_t>(block));
    return a;
  }
  // Blocks of the whole cache (KvShape::block_size 0) that are not a power of 2: only block 0,
  // where the row is the position, can be addressed.
  for (int32_t b : rows.tables) {
    if (b != 0) return unsupported(fmt::format(BITNET_GPU_PREFIX " block tables over blocks of {} positions (not a power of 2)", block));
  }
  return a;
}

std::vector<int32_t> kv_words(const hal::KvRows& rows, const KvAddressing& a) {
  std::vector<int32_t> w(rows.pos.begin(), rows.pos.end());
  if (!a.identity) {
    w.insert(w.end(), rows.table_begin.begin(), rows.table_begin.end());
    w.insert(w.end(), rows.tables.begin(), rows.tables.end());
  }
  return w;
}

std::string step_signature(const hal::Graph& g, const KvAddressing& kv, size_t n_kv_words) {
  std::string s;
  const auto put = [&s](const auto& v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(g.n_tokens);
  put(kv.identity);
  put(kv.block_shift);
  put(n_kv_words);
  put(g.rope.style);
  put(g.rope.n_rot);
  put(g.rope.freq_base);
  put(g.rope.freq_scale);
  put(g.attn.n_head);
  put(g.attn.n_head_kv);
  put(g.attn.head_dim);
  put(g.attn.kq_scale);
  put(g.logits);
  put(g.acts.size());
  for (const hal::ActDesc& a : g.acts) {
    put(a.type);
    put(a.n_rows);
    put(a.n_cols);
  }
  put(g.ops.size());
  for (const hal::Op& op : g.ops) {
    put(op.kind);
    put(op.dst);
    put(op.a);
    put(op.b);
    put(op.w);
    put(op.il);
    put(op.n_head);
    put(op.row0);
    put(op.eps);
  }
  put(g.get_rows.size());
  for (int32_t r : g.get_rows) put(r);
  return s;
}

std::vector<float> rope_table(const hal::Graph& graph) {
  const hal::RopeParams& rp = graph.rope;
  const int64_t half = rp.n_rot / 2;
  std::vector<float> cs(static_cast<size_t>(graph.n_tokens * half * 2));
  const float theta_scale = std::pow(rp.freq_base, -2.0f / static_cast<float>(rp.n_rot));
  for (int64_t t = 0; t < graph.n_tokens; ++t) {
    float theta = static_cast<float>(graph.position(t)) * rp.freq_scale;
    for (int64_t i = 0; i < half; ++i) {
      cs[static_cast<size_t>(2 * (t * half + i))] = std::cos(theta);
      cs[static_cast<size_t>(2 * (t * half + i) + 1)] = std::sin(theta);
      theta *= theta_scale;
    }
  }
  return cs;
}

}  // namespace bitnet::cuda
