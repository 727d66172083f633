// Device memory owned by move-only RAII buffers, and CUDA runtime errors as Status codes.
// Host code of the CUDA backend (CUDA runtime API, never the driver API).
#pragma once

#include "backends/cuda/gpu_runtime.h"

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "bitnet/status.h"

namespace bitnet::cuda {

// kOutOfMemory for allocation failures, kDeviceLost for the sticky errors after which the
// context is unusable (faults, illegal addresses), kInternal for the rest.
Status cuda_status(cudaError_t err, std::string_view what);

// The two kinds of memory a Buffer owns: device memory (cudaMalloc) and page-locked host memory
// (cudaHostAlloc): the DMA engines read and write the latter directly, so a cudaMemcpyAsync from
// or to it is asynchronous and runs at the link's full rate, where one from pageable memory is
// staged by the driver through a pinned bounce buffer of its own.
struct DeviceMemory {
  static constexpr const char* kAlloc = "cudaMalloc";
  static cudaError_t alloc(void** p, uint64_t n) { return cudaMalloc(p, n); }
  static void free(void* p) { (void)cudaFree(p); }
};
struct PinnedMemory {
  static constexpr const char* kAlloc = "cudaHostAlloc";
  static cudaError_t alloc(void** p, uint64_t n) { return cudaHostAlloc(p, n, cudaHostAllocDefault); }
  static void free(void* p) { (void)cudaFreeHost(p); }
};

// kOutOfMemory (or the runtime's other error) for a failed allocation of n bytes for `what`.
Status allocation_status(cudaError_t err, const char* alloc, uint64_t n, std::string_view what);

// A move-only owner of `bytes` of memory of kind M.
template <class M>
class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // `bytes` (at least 1); kOutOfMemory with `what` when there is no room.
  static Result<Buffer> create(uint64_t bytes, std::string_view what) {
    Buffer b;
    const uint64_t n = bytes > 0 ? bytes : 1;
    const cudaError_t err = M::alloc(&b.ptr_, n);
    if (err != cudaSuccess) {
      b.ptr_ = nullptr;
      return allocation_status(err, M::kAlloc, n, what);
    }
    b.bytes_ = n;
    return b;
  }

  void reset() {
    if (ptr_ != nullptr) M::free(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  uint64_t bytes() const { return bytes_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

using DeviceBuffer = Buffer<DeviceMemory>;
using PinnedBuffer = Buffer<PinnedMemory>;

// Weight uploads on their own stream through two pinned chunks: while the DMA engine copies
// one chunk to the device, the host fills the other (its memcpy out of the file mapping or the
// repacked bytes), instead of one blocking pageable cudaMemcpy per tensor. copy() returns once
// the host bytes are in a chunk, so they may go; finish() waits for the last transfer. Without
// pinned memory (cudaHostAlloc refused) it copies with plain cudaMemcpy.
class Uploader {
 public:
  static constexpr uint64_t kChunkBytes = uint64_t{16} << 20;

  Uploader() = default;
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // The stream, the events and the chunks (kInternal/kOutOfMemory only for the stream and events).
  Status init();
  Status copy(void* device_dst, const void* host, uint64_t bytes, std::string_view what);
  // create() + copy().
  Result<DeviceBuffer> upload(const void* host, uint64_t bytes, std::string_view what);
  Status finish();
  bool pinned() const { return static_cast<bool>(chunks_[0]); }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_[2] = {nullptr, nullptr};  // the last transfer out of each chunk
  PinnedBuffer chunks_[2];
  int next_ = 0;
};

// A step's inputs (token ids, KV addressing, the rope table) and its logits staged in pinned
// memory, so that their copies are truly asynchronous. reserve() the step's total before its
// copies (each step ends with a stream sync, so the previous step's copies are done), then
// take() a slice per input. Without pinned memory, or for more than kMaxBytes (the logits of a
// long prompt's every row), reserve() returns false and the caller copies from pageable memory.
class PinnedStaging {
 public:
  static constexpr uint64_t kMaxBytes = uint64_t{64} << 20;
  static uint64_t slice_bytes(uint64_t bytes) { return (bytes + 255) / 256 * 256; }
  bool reserve(uint64_t bytes);
  void release();  // frees the pinned block (release_scratch); the next reserve() allocates again
  // The next slice of `bytes`, or nullptr past what was reserved.
  void* take(uint64_t bytes);

 private:
  PinnedBuffer buf_;
  uint64_t used_ = 0;
  bool failed_ = false;  // cudaHostAlloc refused once: pageable from then on
};

// The pieces copy() cuts `bytes` into: [offset, offset + length) of at most `chunk` bytes each.
struct UploadPiece {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};
std::vector<UploadPiece> upload_pieces(uint64_t bytes, uint64_t chunk);

}  // namespace bitnet::cuda
