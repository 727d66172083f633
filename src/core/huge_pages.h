// Large blocks on transparent huge pages. The kernels stream hundreds of megabytes of weights per
// token; on 4 KB pages every 4 KB is a TLB entry and a point where the hardware prefetchers stop,
// and with 8 tokens a step (a serve batch) two cores streamed 14% fewer products per second
// (bench_cpu_kernels gemm_w2a8_streamed). Linux hands out 2 MB pages to blocks that ask for them
// (madvise(MADV_HUGEPAGE)) when /sys/kernel/mm/transparent_hugepage/enabled is "madvise" or
// "always"; elsewhere the block is ordinary memory.
#pragma once

#include <cstddef>

namespace bitnet {

// Blocks of this size or more are 2 MB aligned and asked for huge pages.
inline constexpr std::size_t kHugeBlockBytes = std::size_t{4} << 20;
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// `bytes` aligned to `align` (a power of two), or to kHugePageBytes on huge pages when bytes >=
// kHugeBlockBytes. Throws std::bad_alloc as operator new.
void* allocate_aligned(std::size_t bytes, std::size_t align);
// Frees a block of allocate_aligned(bytes, align).
void free_aligned(void* p, std::size_t bytes, std::size_t align) noexcept;

// `bytes` of zeros, aligned as calloc aligns (16 bytes); from kHugeBlockBytes on a huge page
// boundary and on huge pages (as allocate_aligned). Pages are only backed by memory once
// touched. Null when the memory cannot be had (or bytes is 0).
void* allocate_zeroed(std::size_t bytes) noexcept;
// Frees a block of allocate_zeroed(bytes).
void free_zeroed(void* p, std::size_t bytes) noexcept;

}  // namespace bitnet
