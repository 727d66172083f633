// Where a GPU step's time goes, per kernel: with BITNET_CUDA_PROFILE=1 the CUDA backend
// launches without graphs, records an event before each launch and after the last, and adds
// the time from each launch's event to the next to its kernel here (the kernel's run plus any
// gap before the next one starts: a host that cannot keep up shows as longer kernels). The
// table goes to stderr when the backend is destroyed. Plain C++, tested on the host.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_plan.h"

namespace bitnet::cuda {

class KernelProfile {
 public:
  void add(Kernel k, double us) {
    Entry& e = entries_[static_cast<size_t>(k)];
    ++e.calls;
    e.us += us;
  }
  void add_step() { ++steps_; }
  bool empty() const { return steps_ == 0; }
  // One line per kernel that ran, the most time first: calls, total ms, mean us per call, share
  // of the total, then the total and the mean per step.
  std::string table() const;

 private:
  struct Entry {
    int64_t calls = 0;
    double us = 0.0;
  };
  std::array<Entry, kKernelCount> entries_{};
  int64_t steps_ = 0;
};

}  // namespace bitnet::cuda
