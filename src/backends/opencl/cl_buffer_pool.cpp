#include "backends/opencl/cl_buffer_pool.h"

#include <fmt/format.h>

#include <algorithm>

namespace bitnet::opencl {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : owner_(std::exchange(o.owner_, nullptr)), mem_(std::move(o.mem_)), n_bytes_(std::exchange(o.n_bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::exchange(o.owner_, nullptr);
    mem_ = std::move(o.mem_);
    n_bytes_ = std::exchange(o.n_bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (mem_ && owner_ != nullptr) owner_->used_bytes_ -= n_bytes_;
  mem_.reset();
  owner_ = nullptr;
  n_bytes_ = 0;
}

Result<DeviceBuffer> ClAllocator::create(size_t n_bytes, std::string_view what) {
  if (n_bytes == 0) return internal_error(fmt::format("{}: zero-byte buffer", what));
  if (n_bytes > max_alloc_bytes_) {
    return out_of_memory(fmt::format("{}: {} bytes exceed the device's largest buffer ({} bytes)",
                                     what, n_bytes, max_alloc_bytes_));
  }
  if (budget_bytes_ != 0 && used_bytes_ + n_bytes > budget_bytes_) {
    return out_of_memory(fmt::format("{}: {} bytes would exceed the device memory budget ({} of {} bytes used)",
                                     what, n_bytes, used_bytes_, budget_bytes_));
  }
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE, n_bytes, nullptr, &err);
  if (err == CL_INVALID_BUFFER_SIZE) err = CL_MEM_OBJECT_ALLOCATION_FAILURE;
  BITNET_RETURN_IF_ERROR(cl_status(err, fmt::format("clCreateBuffer({} bytes) for {}", n_bytes, what)));
  used_bytes_ += n_bytes;
  return DeviceBuffer(this, mem, n_bytes);
}

size_t BufferPool::size_class(size_t n_bytes) {
  constexpr size_t kGranule = 256;  // also keeps every buffer's size a multiple of 16 bytes
  return (std::max<size_t>(n_bytes, 1) + kGranule - 1) / kGranule * kGranule;
}

Result<DeviceBuffer> BufferPool::acquire(size_t n_bytes, std::string_view what) {
  const size_t key = size_class(n_bytes);
  auto it = free_.find(key);
  if (it != free_.end() && !it->second.empty()) {
    DeviceBuffer b = std::move(it->second.back());
    it->second.pop_back();
    ++stats_.reuses;
    return b;
  }
  auto b = allocator_.create(key, what);
  if (!b.ok() && b.status().code() == StatusCode::kOutOfMemory && !free_.empty()) {
    clear();
    b = allocator_.create(key, what);
  }
  if (!b.ok()) return b.status();
  ++stats_.allocations;
  stats_.bytes += key;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes);
  return b;
}

void BufferPool::release(DeviceBuffer buffer) {
  if (!buffer) return;
  const size_t key = buffer.n_bytes();
  free_[key].push_back(std::move(buffer));
}

void BufferPool::clear() {
  for (auto& [key, list] : free_) stats_.bytes -= key * list.size();
  free_.clear();
}

}  // namespace bitnet::opencl
