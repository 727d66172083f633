// For tests: a directory under the system's temp dir for this process's files, created on first
// use and removed with everything in it when the process exits. ctest runs every test case in
// a process of its own, so a directory kept per process and never removed piles up in /tmp
// (thousands of them, gigabytes, before this).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace bitnet::test {

// The directory <temp>/<prefix><pid>; the same path on every call in one process.
inline const std::filesystem::path& process_temp_dir(const std::string& prefix) {
  struct Dir {
    std::filesystem::path path;
    explicit Dir(std::filesystem::path p) : path(std::move(p)) { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid())));
  return dir.path;
}

}  // namespace bitnet::test
