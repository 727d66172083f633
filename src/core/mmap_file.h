// A read-only memory-mapped file (move-only). Weights stay mapped for the engine's lifetime.
// open() accepts only a non-empty regular file (symlinks followed); anything else is an
// io_error naming the path and the reason ("is a directory", "is not a regular file (FIFO)").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "bitnet/status.h"

namespace bitnet {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Drops this process's pages of a read-only file mapping that lie wholly inside `bytes`
// (madvise MADV_DONTNEED): for data copied elsewhere (repacked weights), so the copy does not
// double the resident memory. Later reads fault the pages back in from the file, so nothing is
// lost; the partial pages at either end are kept. Returns the bytes released.
size_t release_mapped_pages(std::span<const uint8_t> bytes);

}  // namespace bitnet
