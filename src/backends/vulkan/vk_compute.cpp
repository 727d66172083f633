// Running an op list: activation buffers from the pool, the whole list recorded into one
// command buffer (one dispatch or copy per op and weight chunk, a barrier after each op),
// one submit per compute(), and only the logits copied back.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "backends/vulkan/vk_backend_impl.h"
#include "hal/validate.h"

namespace bitnet::vulkan {

namespace {

constexpr uint32_t kMaxGroups = 65535;  // the minimum maxComputeWorkGroupCount Vulkan guarantees
constexpr uint32_t kSetsPerPool = 256;

}  // namespace

// A full barrier between dependent steps: every compute or transfer write before it is visible
// to every compute or transfer access after it.
void full_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(cb, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

Result<Buffer*> VulkanBackend::host_buffer(Buffer& slot, uint64_t size) {
  if (!slot || slot.size() < size) {
    slot.reset();
    BITNET_ASSIGN_OR_RETURN(slot, ctx_->create_buffer(size, MemoryKind::kHostVisible));
  }
  return &slot;
}

Result<VkDescriptorSet> VulkanBackend::allocate_set() {
  const VkDescriptorSetLayout layout = pipelines_->set_layout();
  while (true) {
    if (descriptor_pool_next_ == descriptor_pools_.size()) {
      const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kBindings};
      VkDescriptorPoolCreateInfo info{};
      info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
      info.maxSets = kSetsPerPool;
      info.poolSizeCount = 1;
      info.pPoolSizes = &size;
      VkDescriptorPool pool = VK_NULL_HANDLE;
      BITNET_VK_RETURN_IF_ERROR(vkCreateDescriptorPool(ctx_->device(), &info, nullptr, &pool));
      descriptor_pools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    alloc.descriptorPool = descriptor_pools_[descriptor_pool_next_];
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    const VkResult r = vkAllocateDescriptorSets(ctx_->device(), &alloc, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) return vk_status(r, "vkAllocateDescriptorSets");
    ++descriptor_pool_next_;
  }
}

Status VulkanBackend::dispatch(VkCommandBuffer cb, Kernel kernel, std::initializer_list<Binding> bindings,
                               const void* push, size_t push_bytes, uint32_t groups_x, uint32_t groups_y) {
  if (groups_x == 0 || groups_y == 0) return {};
  if (groups_x > kMaxGroups || groups_y > kMaxGroups) {
    return unsupported(fmt::format("{}: {} x {} workgroups exceed the dispatch limit", kernel_id(kernel), groups_x, groups_y));
  }
  BITNET_ASSIGN_OR_RETURN(const VkPipeline pipeline, pipelines_->get(kernel));
  BITNET_ASSIGN_OR_RETURN(const VkDescriptorSet set, allocate_set());
  std::array<VkDescriptorBufferInfo, kBindings> infos{};
  std::array<VkWriteDescriptorSet, kBindings> writes{};
  size_t i = 0;
  for (const Binding& b : bindings) infos[i++] = {b.buffer, b.offset, b.range};
  for (; i < kBindings; ++i) infos[i] = {dummy_.handle(), 0, VK_WHOLE_SIZE};
  for (uint32_t j = 0; j < kBindings; ++j) {
    writes[j].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[j].dstSet = set;
    writes[j].dstBinding = j;
    writes[j].descriptorCount = 1;
    writes[j].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[j].pBufferInfo = &infos[j];
  }
  vkUpdateDescriptorSets(ctx_->device(), kBindings, writes.data(), 0, nullptr);
  std::array<uint8_t, kPushBytes> constants{};
  std::memcpy(constants.data(), push, std::min<size_t>(push_bytes, kPushBytes));
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipelines_->layout(), 0, 1, &set, 0, nullptr);
  vkCmdPushConstants(cb, pipelines_->layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes, constants.data());
  vkCmdDispatch(cb, groups_x, groups_y, 1);
  kernels_used_.insert(std::string(kernel_id(kernel)));
  return {};
}

void VulkanBackend::release_acts() {
  for (DeviceAct& a : acts_) {
    pool_->release(std::move(a.f32));
    pool_->release(std::move(a.q));
    pool_->release(std::move(a.scale));
  }
  acts_.clear();
  pool_->release(std::move(q8_q_));
  pool_->release(std::move(q8_meta_));
}

Status VulkanBackend::prepare(const hal::Graph& graph, std::span<const int32_t> tokens) {
  // Activations that may exceed one binding: written by matmul (split by tokens) and read by
  // transfers only.
  std::vector<bool> bound(graph.acts.size(), false);
  for (const hal::Op& op : graph.ops) {
    for (hal::ActId id : {op.a, op.b}) {
      if (id >= 0 && op.kind != hal::OpKind::kCopyRows && op.kind != hal::OpKind::kStoreKv) bound[static_cast<size_t>(id)] = true;
    }
    if (op.dst >= 0 && op.kind != hal::OpKind::kMatmul && op.kind != hal::OpKind::kCopyRows) bound[static_cast<size_t>(op.dst)] = true;
  }
  release_acts();
  acts_.resize(graph.acts.size());
  for (size_t i = 0; i < graph.acts.size(); ++i) {
    const hal::ActDesc& d = graph.acts[i];
    const uint64_t rows = static_cast<uint64_t>(d.n_rows);
    DeviceAct& a = acts_[i];
    if (d.type == hal::ActType::kF32) {
      const uint64_t bytes = rows * static_cast<uint64_t>(d.n_cols) * 4;
      if (bound[i] && bytes > max_binding_bytes_) {
        return unsupported(fmt::format("activation {} of {} bytes exceeds the storage-buffer binding limit of {} bytes",
                                       d.name, bytes, max_binding_bytes_));
      }
      BITNET_ASSIGN_OR_RETURN(a.f32, pool_->acquire(bytes));
    } else {
      const uint64_t bytes = rows * static_cast<uint64_t>((d.n_cols + 3) / 4) * 4;
      if (bytes > max_binding_bytes_) {
        return unsupported(fmt::format("activation {} of {} bytes exceeds the storage-buffer binding limit of {} bytes",
                                       d.name, bytes, max_binding_bytes_));
      }
      BITNET_ASSIGN_OR_RETURN(a.q, pool_->acquire(bytes));
      BITNET_ASSIGN_OR_RETURN(a.scale, pool_->acquire(rows * 4));
    }
  }
  // One pair of quantized-activation buffers for every 8-bit-activation matmul of the graph.
  uint64_t q8_bytes = 0;
  for (const hal::Op& op : graph.ops) {
    if (op.kind != hal::OpKind::kMatmul) continue;
    const hal::ActDesc& x = graph.acts[static_cast<size_t>(op.a)];
    if (use_quant_dot(weight(op.w), x)) q8_bytes = std::max(q8_bytes, static_cast<uint64_t>(x.n_rows * x.n_cols));
  }
  if (q8_bytes > 0) {
    BITNET_ASSIGN_OR_RETURN(q8_q_, pool_->acquire(q8_bytes));
    BITNET_ASSIGN_OR_RETURN(q8_meta_, pool_->acquire(q8_bytes / 4));  // 8 bytes per 32 elements
  }
  BITNET_ASSIGN_OR_RETURN(Buffer* tok, host_buffer(tokens_, std::max<uint64_t>(4, tokens.size() * 4)));
  std::memcpy(tok->mapped(), tokens.data(), tokens.size() * 4);

  kv_rows_ = hal::resolve_kv(graph, kv_);
  {
    const size_t n = static_cast<size_t>(graph.n_tokens);
    BITNET_ASSIGN_OR_RETURN(Buffer* map, host_buffer(kv_map_, static_cast<uint64_t>((2 * n + kv_rows_.tables.size()) * 4)));
    auto* m = static_cast<int32_t*>(map->mapped());
    std::copy(kv_rows_.pos.begin(), kv_rows_.pos.end(), m);
    std::copy(kv_rows_.table_begin.begin(), kv_rows_.table_begin.end(), m + n);
    std::copy(kv_rows_.tables.begin(), kv_rows_.tables.end(), m + 2 * n);
  }
  bool has_rope = false;
  for (const hal::Op& op : graph.ops) has_rope = has_rope || op.kind == hal::OpKind::kRope;
  if (has_rope) {
    // llama.cpp's float theta recurrence, as the CPU reference: theta_i = pos * freq_scale * theta_scale^i.
    const hal::RopeParams& rp = graph.rope;
    if (rp.n_rot <= 0 || rp.n_rot % 2 != 0 || rp.n_rot > graph.attn.head_dim) {
      return unsupported(fmt::format("rope over {} of {} dimensions", rp.n_rot, graph.attn.head_dim));
    }
    const int64_t half = rp.n_rot / 2;
    BITNET_ASSIGN_OR_RETURN(Buffer* table, host_buffer(rope_table_, static_cast<uint64_t>(graph.n_tokens * half * 8)));
    auto* cs = static_cast<float*>(table->mapped());
    const float theta_scale = std::pow(rp.freq_base, -2.0f / static_cast<float>(rp.n_rot));
    for (int64_t t = 0; t < graph.n_tokens; ++t) {
      float theta = static_cast<float>(graph.position(t)) * rp.freq_scale;
      for (int64_t i = 0; i < half; ++i) {
        cs[2 * (t * half + i)] = std::cos(theta);
        cs[2 * (t * half + i) + 1] = std::sin(theta);
        theta *= theta_scale;
      }
    }
  }
  return {};
}

Status VulkanBackend::compute(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<float> logits) {
  BITNET_RETURN_IF_ERROR(hal::validate_graph(graph, tokens, logits.size(), shapes_, kv_));
  const uint64_t out_bytes = logits.size_bytes();
  const auto copy_logits = [&](VkCommandBuffer cb) -> Status {
    BITNET_RETURN_IF_ERROR(host_buffer(readback_, out_bytes).status());
    const VkBufferCopy region{0, 0, out_bytes};
    vkCmdCopyBuffer(cb, acts_[static_cast<size_t>(graph.logits)].f32.handle(), readback_.handle(), 1, &region);
    host_read_barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
    return {};
  };
  BITNET_RETURN_IF_ERROR(run_graph(graph, tokens, copy_logits));
  std::memcpy(logits.data(), readback_.mapped(), out_bytes);
  return {};
}

Status VulkanBackend::compute_top(const hal::Graph& graph, std::span<const int32_t> tokens,
                                  std::span<const hal::TopRequest> req, std::vector<std::vector<hal::TokenLogit>>& out) {
  BITNET_ASSIGN_OR_RETURN(const hal::ActDesc* top_act, hal::top_logits(graph, req.size()));
  const hal::ActDesc& a = *top_act;
  BITNET_RETURN_IF_ERROR(hal::validate_graph(graph, tokens, static_cast<size_t>(a.n_rows * a.n_cols), shapes_, kv_));
  // Logits past one binding (many rows of a large vocabulary): the rows come back whole.
  if (static_cast<uint64_t>(a.n_rows * a.n_cols) * 4 > max_binding_bytes_) return compute_then_select(graph, tokens, req, out);
  hal::TopPlan plan;
  if (!hal::plan_top(req, a.n_cols, plan)) return invalid_argument("too many logits asked for");
  BITNET_ASSIGN_OR_RETURN(Buffer* args, host_buffer(top_args_, plan.words.size() * sizeof(int32_t)));
  std::memcpy(args->mapped(), plan.words.data(), plan.words.size() * sizeof(int32_t));
  BITNET_ASSIGN_OR_RETURN(Buffer* entries, host_buffer(top_entries_, static_cast<uint64_t>(std::max<int64_t>(plan.n_out, 1)) * 8));
  const auto select = [&](VkCommandBuffer cb) -> Status {
    const uint32_t push[] = {static_cast<uint32_t>(a.n_cols), static_cast<uint32_t>(a.n_rows)};
    BITNET_RETURN_IF_ERROR(dispatch(cb, Kernel::kTopK, {bind(acts_[static_cast<size_t>(graph.logits)].f32), bind(*args), bind(*entries)},
                                    push, sizeof(push), static_cast<uint32_t>(a.n_rows)));
    host_read_barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT);
    return {};
  };
  BITNET_RETURN_IF_ERROR(run_graph(graph, tokens, select));
  hal::unpack_top(plan, entries->mapped(), out);
  return {};
}

// The writes of `stage` (access `access`) made visible to host reads after the submit.
void VulkanBackend::host_read_barrier(VkCommandBuffer cb, VkPipelineStageFlags stage, VkAccessFlags access) {
  VkMemoryBarrier to_host{};
  to_host.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  to_host.srcAccessMask = access;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb, stage, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, nullptr, 0, nullptr);
}

Status VulkanBackend::run_graph(const hal::Graph& graph, std::span<const int32_t> tokens,
                                const std::function<Status(VkCommandBuffer)>& read_back) {
  Status s = prepare(graph, tokens);
  if (s.ok()) {
    for (VkDescriptorPool p : descriptor_pools_) vkResetDescriptorPool(ctx_->device(), p, 0);
    descriptor_pool_next_ = 0;
    auto cb = ctx_->begin_commands();
    if (!cb.ok()) {
      s = cb.status();
    } else {
      for (const hal::Op& op : graph.ops) {
        s = record_op(*cb, graph, op);
        if (!s.ok()) break;
        full_barrier(*cb);
      }
      if (s.ok()) s = read_back(*cb);
      if (s.ok()) {
        s = ctx_->submit_and_wait(*cb);
      } else {
        ctx_->discard_commands(*cb);
      }
    }
  }
  release_acts();
  return s;
}

}  // namespace bitnet::vulkan
