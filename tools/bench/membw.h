// The machine's memory read bandwidth, measured the way a decode step reads weights: every
// thread streams its own slice of a buffer far larger than the caches, once per repetition.
#pragma once

#include <cstddef>

namespace bitnet::bench {

// Best of `reps` passes over an `n_bytes` buffer on n_threads threads, in GB/s (1e9 bytes/s).
double measure_read_bandwidth(int n_threads, size_t n_bytes = size_t{1} << 30, int reps = 5);

}  // namespace bitnet::bench
