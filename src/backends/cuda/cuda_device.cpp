#include "backends/cuda/cuda_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace bitnet::cuda {

Status cuda_status(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return {};
  const std::string msg = fmt::format("{}: {} ({})", what, cudaGetErrorName(err), cudaGetErrorString(err));
  switch (err) {
    case cudaErrorMemoryAllocation:
      (void)cudaGetLastError();  // not sticky: clear it
      return out_of_memory(msg);
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
#if !BITNET_HIP  // CUDA's only (ROCm usually aborts the process on a GPU memory fault instead)
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorDevicesUnavailable:
#endif
      return device_lost(msg);
    default:
      return internal_error(msg);
  }
}

Status allocation_status(cudaError_t err, const char* alloc, uint64_t n, std::string_view what) {
  return cuda_status(err, fmt::format("{} of {} bytes for {}", alloc, n, what));
}

bool PinnedStaging::reserve(uint64_t bytes) {
  used_ = 0;
  if (failed_ || bytes > kMaxBytes) return false;
  if (buf_.bytes() < bytes) {
    buf_.reset();
    auto b = PinnedBuffer::create(bytes + bytes / 2, "step staging");  // headroom for the next steps
    if (!b.ok()) {
      (void)cudaGetLastError();
      failed_ = true;
      return false;
    }
    buf_ = std::move(b).value();
  }
  return true;
}

void PinnedStaging::release() {
  buf_.reset();
  used_ = 0;
}

void* PinnedStaging::take(uint64_t bytes) {
  const uint64_t n = slice_bytes(bytes);
  if (!buf_ || failed_ || used_ + n > buf_.bytes()) return nullptr;
  void* p = buf_.as<uint8_t>() + used_;
  used_ += n;
  return p;
}

std::vector<UploadPiece> upload_pieces(uint64_t bytes, uint64_t chunk) {
  std::vector<UploadPiece> pieces;
  if (chunk == 0) return pieces;
  for (uint64_t off = 0; off < bytes; off += chunk) pieces.push_back({off, std::min(chunk, bytes - off)});
  return pieces;
}

Uploader::~Uploader() {
  if (stream_ != nullptr) {
    (void)cudaStreamSynchronize(stream_);  // nothing may still read the chunks
    (void)cudaStreamDestroy(stream_);
  }
  for (cudaEvent_t e : done_) {
    if (e != nullptr) (void)cudaEventDestroy(e);
  }
}

Status Uploader::init() {
  BITNET_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "the upload stream"));
  for (cudaEvent_t& e : done_) {
    BITNET_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "an upload event"));
  }
  for (PinnedBuffer& c : chunks_) {
    auto b = PinnedBuffer::create(kChunkBytes, "upload staging");
    if (!b.ok()) {  // pageable copies instead
      (void)cudaGetLastError();
      chunks_[0].reset();
      chunks_[1].reset();
      return {};
    }
    c = std::move(b).value();
  }
  return {};
}

Status Uploader::copy(void* device_dst, const void* host, uint64_t bytes, std::string_view what) {
  const std::string context = fmt::format("upload of {}", what);
  if (!pinned()) return cuda_status(cudaMemcpy(device_dst, host, bytes, cudaMemcpyHostToDevice), context);
  for (const UploadPiece& p : upload_pieces(bytes, kChunkBytes)) {
    const int slot = next_;
    next_ ^= 1;
    // The chunk's previous transfer must be done before it is overwritten.
    BITNET_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(done_[slot]), context));
    std::memcpy(chunks_[slot].get(), static_cast<const uint8_t*>(host) + p.offset, p.bytes);
    BITNET_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(static_cast<uint8_t*>(device_dst) + p.offset, chunks_[slot].get(),
                                                       p.bytes, cudaMemcpyHostToDevice, stream_),
                                       context));
    BITNET_RETURN_IF_ERROR(cuda_status(cudaEventRecord(done_[slot], stream_), context));
  }
  return {};
}

Result<DeviceBuffer> Uploader::upload(const void* host, uint64_t bytes, std::string_view what) {
  BITNET_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::create(bytes, what));
  if (bytes == 0) return b;
  if (Status s = copy(b.get(), host, bytes, what); !s.ok()) {
    (void)finish();  // the pieces already queued must land before b is freed
    return s;
  }
  return b;
}

Status Uploader::finish() {
  if (!pinned()) return cuda_status(cudaDeviceSynchronize(), "uploading the weights");
  return cuda_status(cudaStreamSynchronize(stream_), "uploading the weights");
}

}  // namespace bitnet::cuda
