// Results of `bitnet bench` and their output as a llama-bench-style markdown table, JSON (with
// llama-bench's field names) or CSV.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bitnet/engine.h"

namespace bitnet::bench {

struct Row {
  std::string model_path;
  std::string model_name;      // general.name or the file name
  std::string model_type;      // "bitnet-b1.58 i2_s:210 f32:121 f16:1"
  uint64_t model_size = 0;     // bytes of all weights
  uint64_t n_params = 0;
  uint64_t bytes_per_token = 0;
  // K and V bytes of one cached position over all layers: a decode step reads them for every
  // position its token attends to (0: not counted).
  uint64_t kv_bytes_per_pos = 0;
  std::string backend;         // device id, naming the kernel set: "cpu-avx2"
  std::string head_type;       // "" = as stored
  std::string kv_type;         // the KV cache's elements as the backend stores them: "f16" | "f32"
  int n_threads = 0;
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
  int64_t n_parallel = 1;      // decode: sequences stepped together (--parallel); t/s is their sum
  int64_t n_depth = 0;         // tokens already in the KV cache when the test starts (-d)
  std::vector<double> samples_ts;
  // A decode row's bandwidth bound: the machine's read bandwidth on n_threads, measured, or, on a
  // real GPU, its memory's peak as the driver reports it (0: unknown). On the host, the mean of
  // membw_samples.
  double membw_gbps = 0.0;
  // On the host, each run's own bound (one per sample, in order): the higher of the readings
  // taken just before and just after it, since a shared host's bandwidth moves within seconds.
  std::vector<double> membw_samples;
  bool device_peak = false;    // membw_gbps is a GPU's memory peak, not a host reading
  double load_seconds = 0.0;
  uint64_t peak_rss_bytes = 0;  // VmHWM over the load and every test of this engine

  std::string test_name() const;  // "pp128", "tg64", "tg64 np8" (8 sequences), "tg64 @ d4096"
  double avg_ts() const;
  double stddev_ts() const;
  // Decode: bytes read per second, the weights once per step (bytes_per_token) and each
  // sequence's cache: kv_bytes_per_pos x the positions its tokens attend to on average (a tg
  // test's n_gen tokens after n_depth attend to n_depth + (n_gen + 1) / 2).
  double gbps() const;
  // The fraction of the bound that decode read: the mean over the runs of each run's GB/s over
  // its own bound where membw_samples has one per run (runs without one left out), else
  // gbps() / membw_gbps (0: no bound). Not gbps() / membw_gbps when the runs' bounds differ.
  double bw_fraction() const;

 private:
  double gbps_at(double ts) const;  // gbps() at ts tokens/s
};

// The fields every row of one engine shares.
Row describe(const Model& model, const std::string& path, const std::string& head_type);

// format: "md" | "json" | "csv".
std::string format_rows(const std::vector<Row>& rows, const std::string& format);

}  // namespace bitnet::bench
