#include "core/huge_pages.h"

#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace bitnet {
namespace {

std::size_t block_align(std::size_t bytes, std::size_t align) {
  return bytes >= kHugeBlockBytes && align < kHugePageBytes ? kHugePageBytes : align;
}

}  // namespace

void* allocate_aligned(std::size_t bytes, std::size_t align) {
  void* p = ::operator new(bytes, std::align_val_t{block_align(bytes, align)});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Only whole huge pages inside the block: the allocator may put other data after its end.
  // A kernel without transparent huge pages refuses the advice, and the block stays as it is.
  if (bytes >= kHugeBlockBytes) ::madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
#endif
  return p;
}

void free_aligned(void* p, std::size_t bytes, std::size_t align) noexcept {
  ::operator delete(p, std::align_val_t{block_align(bytes, align)});
}

}  // namespace bitnet
