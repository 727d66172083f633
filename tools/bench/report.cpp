#include "report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

namespace bitnet::bench {

std::string Row::test_name() const {
  // As llama-bench: "pp512 @ d4096" for a test after 4096 tokens of context.
  const char* kind = n_prompt > 0 ? "pp" : "tg";
  const int64_t n = n_prompt > 0 ? n_prompt : n_gen;
  const int64_t np = n_prompt > 0 ? 1 : n_parallel;
  if (np > 1) return n_depth > 0 ? fmt::format("{}{} np{} @ d{}", kind, n, np, n_depth) : fmt::format("{}{} np{}", kind, n, np);
  return n_depth > 0 ? fmt::format("{}{} @ d{}", kind, n, n_depth) : fmt::format("{}{}", kind, n);
}

double Row::avg_ts() const {
  if (samples_ts.empty()) return 0.0;
  return std::accumulate(samples_ts.begin(), samples_ts.end(), 0.0) / static_cast<double>(samples_ts.size());
}

// Sample standard deviation, as llama-bench reports it (0 for a single run).
double Row::stddev_ts() const {
  if (samples_ts.size() < 2) return 0.0;
  const double avg = avg_ts();
  double sum = 0.0;
  for (double x : samples_ts) sum += (x - avg) * (x - avg);
  return std::sqrt(sum / static_cast<double>(samples_ts.size() - 1));
}

double Row::gbps_at(double ts) const {
  if (n_gen <= 0) return 0.0;
  const double positions = static_cast<double>(n_depth) + static_cast<double>(n_gen + 1) / 2.0;
  const double step_bytes = static_cast<double>(bytes_per_token) +
                            static_cast<double>(n_parallel) * static_cast<double>(kv_bytes_per_pos) * positions;
  return step_bytes * ts / static_cast<double>(n_parallel) / 1e9;
}

double Row::gbps() const { return gbps_at(avg_ts()); }

double Row::bw_fraction() const {
  if (!membw_samples.empty() && membw_samples.size() == samples_ts.size()) {
    double sum = 0.0;
    int n = 0;
    for (size_t i = 0; i < samples_ts.size(); ++i) {
      if (membw_samples[i] <= 0) continue;  // no reading beside that run
      sum += gbps_at(samples_ts[i]) / membw_samples[i];
      ++n;
    }
    if (n > 0) return sum / n;
  }
  return membw_gbps > 0 ? gbps() / membw_gbps : 0.0;
}

Row describe(const Model& engine, const std::string& path, const std::string& head_type) {
  const ModelSummary& m = engine.summary();
  Row r;
  r.model_path = path;
  r.model_name = !m.name.empty() ? m.name : std::filesystem::path(path).filename().string();
  r.model_type = m.architecture + " " + m.weight_types;
  r.model_size = m.weight_bytes;
  r.n_params = m.n_params;
  r.bytes_per_token = m.bytes_per_token;
  r.backend = engine.backend_name();
  r.head_type = head_type;
  r.kv_type = engine.kv_type();
  r.kv_bytes_per_pos = static_cast<uint64_t>(2 * m.n_layer * m.n_embd_kv) * (r.kv_type == "f32" ? 4u : 2u);
  // A real GPU's weights stream from its own memory: its peak is the bound, not the host's
  // read bandwidth (software devices, PoCL and lavapipe, run on the host and keep that).
  if (engine.device().is_gpu) {
    r.device_peak = true;
    r.membw_gbps = engine.device().memory_bandwidth_gbs;
  }
  return r;
}

namespace {

std::string head_label(const Row& r) { return r.head_type.empty() ? "file" : r.head_type; }

std::string size_label(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  return b >= (1 << 30) ? fmt::format("{:.2f} GiB", b / (1 << 30)) : fmt::format("{:.2f} MiB", b / (1 << 20));
}

std::string count_label(uint64_t n) {
  const double x = static_cast<double>(n);
  return x >= 1e9 ? fmt::format("{:.2f} B", x / 1e9) : fmt::format("{:.2f} M", x / 1e6);
}

// The bound as the table shows it: one reading, or the runs' range where it moved by more than 5%.
std::string bound_label(const Row& r) {
  if (r.device_peak) return fmt::format("{:.1f} peak", r.membw_gbps);
  if (r.membw_samples.empty()) return fmt::format("{:.1f}", r.membw_gbps);
  const auto [lo, hi] = std::minmax_element(r.membw_samples.begin(), r.membw_samples.end());
  return *hi > 1.05 * *lo ? fmt::format("{:.1f}-{:.1f}", *lo, *hi) : fmt::format("{:.1f}", r.membw_gbps);
}

std::string markdown(const std::vector<Row>& rows) {
  std::string out =
      "| model | size | params | backend | head | kv | threads | test | t/s | GB/s | of read bw | load s | peak RSS |\n"
      "| --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const Row& r : rows) {
    std::string bw = "", frac = "";
    if (r.n_gen > 0) {
      bw = fmt::format("{:.1f}", r.gbps());
      if (r.membw_gbps > 0) {
        frac = fmt::format("{:.0f}% of {}", 100.0 * r.bw_fraction(), bound_label(r));
      }
    }
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {:.2f} ± {:.2f} | {} | {} | {:.2f} | {} |\n",
                       r.model_name, size_label(r.model_size), count_label(r.n_params), r.backend, head_label(r),
                       r.kv_type, r.n_threads, r.test_name(), r.avg_ts(), r.stddev_ts(), bw, frac, r.load_seconds,
                       size_label(r.peak_rss_bytes));
  }
  return out;
}

// llama-bench's field names where they exist, then ours.
nlohmann::ordered_json to_json(const Row& r) {
  std::vector<double> samples_ns;
  const double n_tokens = static_cast<double>(r.n_prompt + r.n_gen * r.n_parallel);
  for (double ts : r.samples_ts) samples_ns.push_back(n_tokens / ts * 1e9);
  const double avg_ns = samples_ns.empty() ? 0.0 : std::accumulate(samples_ns.begin(), samples_ns.end(), 0.0) / static_cast<double>(samples_ns.size());
  return {{"model_filename", r.model_path},
          {"model_type", r.model_type},
          {"model_size", r.model_size},
          {"model_n_params", r.n_params},
          {"backends", r.backend},
          {"n_threads", r.n_threads},
          {"n_prompt", r.n_prompt},
          {"n_gen", r.n_gen},
          {"n_parallel", r.n_parallel},
          {"n_depth", r.n_depth},
          {"avg_ns", static_cast<uint64_t>(avg_ns)},
          {"avg_ts", r.avg_ts()},
          {"stddev_ts", r.stddev_ts()},
          {"samples_ts", r.samples_ts},
          {"head_type", head_label(r)},
          {"type_k", r.kv_type},  // llama-bench's names; K and V share one type here
          {"type_v", r.kv_type},
          {"bytes_per_token", r.bytes_per_token},
          {"kv_bytes_per_pos", r.kv_bytes_per_pos},
          {"gbps", r.gbps()},
          {"membw_gbps", r.membw_gbps},
          {"membw_samples_gbps", r.membw_samples},
          {"membw_fraction", r.bw_fraction()},
          {"membw_source", r.device_peak ? "device peak" : "host read"},
          {"load_seconds", r.load_seconds},
          {"peak_rss_bytes", r.peak_rss_bytes}};
}

// Built by appending: GCC 12 warns (-Wrestrict, a false positive) on "\"" + std::string.
std::string csv_field(const nlohmann::ordered_json& v) {
  if (!v.is_string() && !v.is_array()) return v.dump();
  std::string s = "\"";
  if (v.is_string()) {
    s += v.get<std::string>();
  } else {
    for (const auto& x : v) {
      if (s.size() > 1) s += ' ';
      s += x.dump();
    }
  }
  s += '"';
  return s;
}

}  // namespace

std::string format_rows(const std::vector<Row>& rows, const std::string& format) {
  if (format == "md") return markdown(rows);
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const Row& r : rows) all.push_back(to_json(r));
  if (format == "json") return all.dump(2) + "\n";
  std::string out;
  // One line of a row's keys or values (appended, as csv_field).
  const auto add_line = [&out](const nlohmann::ordered_json& row, bool keys) {
    for (auto it = row.begin(); it != row.end(); ++it) {
      if (it != row.begin()) out += ',';
      out += keys ? it.key() : csv_field(it.value());
    }
    out += '\n';
  };
  for (size_t i = 0; i < all.size(); ++i) {
    if (i == 0) add_line(all[0], true);
    add_line(all[i], false);
  }
  return out;
}

}  // namespace bitnet::bench
