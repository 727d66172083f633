#include "backends/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <cstdio>

#include "backends/cuda/cuda_backend_impl.h"
#include "core/env.h"
#if BITNET_HIP
#include "backends/cuda/cuda_probe.h"   // hip_arch_refusal
#include "backends/cuda/hip_backend.h"  // the registry's declarations, checked against these
#endif

namespace bitnet::cuda {

Result<std::unique_ptr<hal::Backend>> CudaBackend::create(const CudaOptions& options) {
  const int device_index = options.device_index;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);  // without a driver: an error, count untouched
  if (err != cudaSuccess) return unavailable(fmt::format(BITNET_GPU_PREFIX " {} ({})", cudaGetErrorName(err), cudaGetErrorString(err)));
  if (device_index < 0 || device_index >= count) {
    return unavailable(fmt::format(BITNET_GPU_PREFIX " no device {} ({} device(s))", device_index, count));
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->device_ = device_index;
  b->graphs_ = options.graphs && !options.profile;  // a replayed graph cannot be timed per kernel
  b->fuse_ = options.fuse;
  b->profile_on_ = options.profile;
  BITNET_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_index), "cudaSetDevice"));
  BITNET_RETURN_IF_ERROR(cuda_status(cudaGetDeviceProperties(&b->prop_, device_index), "cudaGetDeviceProperties"));
#if BITNET_HIP
  if (std::string why = hip_arch_refusal(b->prop_.gcnArchName); !why.empty()) {
    return unavailable(fmt::format(BITNET_GPU_PREFIX " device {}: {}", device_index, why));
  }
#endif
  // A device the build has no code for (say sm_70 against sm_75..sm_90 + PTX 90): refused here,
  // as unavailable, so that selection falls back and says why, rather than every launch failing.
  if (const GpuError e = kernel_image_status(); e != kGpuSuccess) {
    return unavailable(fmt::format(BITNET_GPU_PREFIX " device {} ({}, compute capability {}.{}): no kernel image for it in this "
                                   "build ({}); rebuild with its architecture in CMAKE_CUDA_ARCHITECTURES",
                                   device_index, b->prop_.name, b->prop_.major, b->prop_.minor, cudaGetErrorName(e)));
  }
  BITNET_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  b->pool_ = std::make_unique<DevicePool>(DeviceAllocator{
      [](uint64_t bytes) -> void* {
        void* p = nullptr;
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
          (void)cudaGetLastError();
          return nullptr;
        }
        return p;
      },
      [](void* p) { (void)cudaFree(p); }});
  return std::unique_ptr<hal::Backend>(std::move(b));
}

CudaBackend::~CudaBackend() {
  (void)cudaSetDevice(device_);
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  if (!profile_.empty()) std::fprintf(stderr, BITNET_GPU_PREFIX " profile (BITNET_CUDA_PROFILE):\n%s", profile_.table().c_str());
  for (cudaEvent_t e : profile_events_) (void)cudaEventDestroy(e);
  if (pool_) {
    drop_captured();
    release_buffers(step_, true);
    for (PoolBlock* p : {&top_args_, &top_entries_}) pool_->release(std::exchange(*p, {}));
    pool_.reset();
  }
  weights_.clear();
  k_cache_.clear();
  v_cache_.clear();
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

hal::BackendInfo CudaBackend::info() const {
#if BITNET_HIP
  return {kGpuBackendId, fmt::format("{} ({}, {} CUs, {} MiB)", prop_.name, prop_.gcnArchName, prop_.multiProcessorCount,
                                     prop_.totalGlobalMem >> 20), 1};
#else
  return {kGpuBackendId, fmt::format("{} (cc {}.{}, {} SMs, {} MiB)", prop_.name, prop_.major, prop_.minor,
                                     prop_.multiProcessorCount, prop_.totalGlobalMem >> 20), 1};
#endif
}

Status CudaBackend::load_weights(std::span<const hal::WeightDesc> weights) {
  BITNET_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
  drop_captured();  // its launches point at the old weights
  weights_.clear();
  weight_info_.clear();
  weight_bytes_ = 0;
  weights_.reserve(weights.size());
  Uploader up;
  BITNET_RETURN_IF_ERROR(up.init());
  for (const hal::WeightDesc& d : weights) {
    auto w = upload_weight(d, up);
    if (!w.ok()) {
      (void)up.finish();  // no transfer may still write into the buffers freed below
      weights_.clear();
      weight_info_.clear();
      weight_bytes_ = 0;
      return w.status();
    }
    weight_bytes_ += w->device_bytes();
    weight_info_.push_back(w->info);
    weights_.push_back(std::move(w).value());
  }
  shapes_ = hal::weight_shapes(weights);
  // The upload stream is not the backend's: the weights must have landed before a step runs.
  return up.finish();
}

Status CudaBackend::init_kv(const hal::KvShape& shape) {
  BITNET_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
  drop_captured();  // its launches point at the old cache
  k_cache_.clear();
  v_cache_.clear();
  kv_ = {};
  if (shape.n_layer <= 0 || shape.n_ctx <= 0 || shape.n_embd_kv <= 0) {
    return invalid_argument(fmt::format(BITNET_GPU_PREFIX " KV cache of {} layers x {} positions x {}", shape.n_layer, shape.n_ctx,
                                        shape.n_embd_kv));
  }
  if (shape.block_size > 0 && (shape.n_ctx % shape.block_size != 0 || (shape.block_size & (shape.block_size - 1)) != 0)) {
    return invalid_argument(fmt::format(BITNET_GPU_PREFIX " KV blocks of {} positions in a cache of {}", shape.block_size, shape.n_ctx));
  }
  // F16 whatever was asked: attention_f16 is the only attention kernel (stats().kv_type).
  const uint64_t layer_bytes = static_cast<uint64_t>(shape.n_ctx) * static_cast<uint64_t>(shape.n_embd_kv) * 2;
  for (int32_t il = 0; il < shape.n_layer; ++il) {
    for (std::vector<DeviceBuffer>* cache : {&k_cache_, &v_cache_}) {
      auto b = DeviceBuffer::create(layer_bytes, "the KV cache");
      Status s = b.ok() ? cuda_status(cudaMemset(b->get(), 0, layer_bytes), "clearing the KV cache") : b.status();
      if (!s.ok()) {
        k_cache_.clear();
        v_cache_.clear();
        return s.with_context(fmt::format("KV cache of {} MiB", 2 * layer_bytes * static_cast<uint64_t>(shape.n_layer) >> 20));
      }
      cache->push_back(std::move(b).value());
    }
  }
  // The memsets run on the legacy stream, which the backend's stream does not wait for.
  BITNET_RETURN_IF_ERROR(cuda_status(cudaDeviceSynchronize(), "clearing the KV cache"));
  kv_ = shape;
  kv_.type = hal::KvType::kF16;
  return {};
}

hal::BackendStats CudaBackend::stats() const {
  hal::BackendStats s;
  s.weight_bytes = weight_bytes_;
  for (const DeviceBuffer& b : k_cache_) s.kv_bytes += b.bytes();
  for (const DeviceBuffer& b : v_cache_) s.kv_bytes += b.bytes();
  s.kv_type = hal::KvType::kF16;
  const DevicePoolStats& p = pool_->stats();
  s.pool_allocations = p.allocations;
  s.pool_reuses = p.reuses;
  s.pool_bytes = p.bytes;
  s.pool_peak_bytes = p.peak_bytes;
  return s;
}

void CudaBackend::release_scratch() {
  (void)cudaSetDevice(device_);
  (void)cudaStreamSynchronize(stream_);
  drop_captured();
  release_buffers(step_, true);
  for (PoolBlock* p : {&top_args_, &top_entries_}) pool_->release(std::exchange(*p, {}));
  pool_->clear();
  inputs_staging_.release();
  logits_staging_.release();
}

Result<std::unique_ptr<hal::Backend>> make_backend(const CudaOptions& options) { return CudaBackend::create(options); }

Result<std::unique_ptr<hal::Backend>> make_backend(int device_index) {
  CudaOptions o;
  o.device_index = device_index;
  o.profile = env_flag("BITNET_CUDA_PROFILE");
  return CudaBackend::create(o);
}

}  // namespace bitnet::cuda
