#include "report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "membw.h"

namespace bitnet::bench {
namespace {

Row decode_row() {
  Row r;
  r.model_path = "m.gguf";
  r.model_name = "m";
  r.model_size = 3u << 30;
  r.n_params = 2'400'000'000;
  r.bytes_per_token = 1'000'000'000;
  r.backend = "cpu-avx2";
  r.kv_type = "f16";
  r.n_threads = 2;
  r.n_gen = 64;
  r.samples_ts = {10.0, 12.0, 14.0};
  r.membw_gbps = 20.0;
  return r;
}

TEST(BenchReport, StatisticsAndBandwidth) {
  const Row r = decode_row();
  EXPECT_EQ(r.test_name(), "tg64");
  EXPECT_DOUBLE_EQ(r.avg_ts(), 12.0);
  EXPECT_DOUBLE_EQ(r.stddev_ts(), 2.0);  // sample standard deviation, as llama-bench
  EXPECT_DOUBLE_EQ(r.gbps(), 12.0);      // 1 GB per token x 12 tokens/s
  Row p = r;
  p.n_gen = 0;
  p.n_prompt = 128;
  EXPECT_EQ(p.test_name(), "pp128");
  EXPECT_DOUBLE_EQ(p.gbps(), 0.0);       // bandwidth is reported for decoding only
  Row np = r;
  np.n_parallel = 4;                     // 12 tokens/s over 4 sequences: 3 steps/s
  EXPECT_EQ(np.test_name(), "tg64 np4");
  EXPECT_DOUBLE_EQ(np.gbps(), 3.0);
  Row deep = r;
  deep.n_depth = 4096;                   // llama-bench's name for a test after 4096 tokens
  EXPECT_EQ(deep.test_name(), "tg64 @ d4096");
  EXPECT_DOUBLE_EQ(deep.gbps(), 12.0) << "no cache bytes given: the weights alone";
  // 1000 bytes per cached position: each token attends to 4096 + 32.5 positions on average.
  deep.kv_bytes_per_pos = 1000;
  EXPECT_DOUBLE_EQ(deep.gbps(), (1e9 + 1000 * 4128.5) * 12.0 / 1e9);
  np.kv_bytes_per_pos = 1000;            // each of the 4 sequences' caches, 32.5 positions each
  EXPECT_DOUBLE_EQ(np.gbps(), (1e9 + 4 * 1000 * 32.5) * 3.0 / 1e9);
  p.n_depth = 512;
  EXPECT_EQ(p.test_name(), "pp128 @ d512");
}

TEST(BenchReport, JsonUsesLlamaBenchFieldNames) {
  const auto j = nlohmann::json::parse(format_rows({decode_row()}, "json"));
  ASSERT_EQ(j.size(), 1u);
  for (const char* key : {"model_filename", "model_type", "model_size", "model_n_params", "n_threads", "n_prompt",
                          "n_gen", "n_depth", "avg_ns", "avg_ts", "stddev_ts", "samples_ts", "gbps", "membw_gbps"}) {
    EXPECT_TRUE(j[0].contains(key)) << key;
  }
  EXPECT_EQ(j[0]["n_gen"], 64);
  EXPECT_EQ(j[0]["type_k"], "f16");
  EXPECT_EQ(j[0]["type_v"], "f16");
  EXPECT_DOUBLE_EQ(j[0]["avg_ts"].get<double>(), 12.0);
}

TEST(BenchReport, MarkdownAndCsvCarryTheSameRow) {
  const std::string md = format_rows({decode_row()}, "md");
  EXPECT_NE(md.find("| cpu-avx2 | file | f16 | 2 | tg64 | 12.00 ± 2.00 | 12.0 | 60% of 20.0 |"), std::string::npos) << md;
  const std::string csv = format_rows({decode_row()}, "csv");
  EXPECT_EQ(csv.rfind("model_filename,model_type,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\"cpu-avx2\",2,0,64,"), std::string::npos) << csv;
}

// A GPU row's bound is the device's memory peak, said so in both outputs; an unknown peak
// leaves the fraction out rather than comparing with the host.
TEST(BenchReport, AGpuRowIsComparedWithItsDevicePeak) {
  Row r = decode_row();
  r.backend = "cuda:0";
  r.device_peak = true;
  r.membw_gbps = 3352.3;
  r.bytes_per_token = 800'000'000;  // 12 tokens/s: 9.6 GB/s
  const std::string md = format_rows({r}, "md");
  EXPECT_NE(md.find("| 9.6 | 0% of 3352.3 peak |"), std::string::npos) << md;
  const auto j = nlohmann::json::parse(format_rows({r}, "json"));
  EXPECT_EQ(j[0]["membw_source"], "device peak");
  EXPECT_EQ(nlohmann::json::parse(format_rows({decode_row()}, "json"))[0]["membw_source"], "host read");
  r.membw_gbps = 0.0;
  EXPECT_NE(format_rows({r}, "md").find("| 9.6 |  |"), std::string::npos);
}

// Each run against the bandwidth read beside it: the fraction is the mean of the runs' own
// fractions, and the table shows the bounds' range where they moved by more than 5%.
TEST(BenchReport, EachRunIsComparedWithItsOwnBound) {
  Row r = decode_row();
  r.membw_samples = {20.0, 24.0, 40.0};  // 10, 12 and 14 GB/s: 50%, 50%, 35%
  r.membw_gbps = 28.0;
  EXPECT_DOUBLE_EQ(r.bw_fraction(), 0.45);
  EXPECT_NE(format_rows({r}, "md").find("| 12.0 | 45% of 20.0-40.0 |"), std::string::npos) << format_rows({r}, "md");
  const auto j = nlohmann::json::parse(format_rows({r}, "json"));
  EXPECT_EQ(j[0]["membw_samples_gbps"].size(), 3u);
  EXPECT_DOUBLE_EQ(j[0]["membw_fraction"].get<double>(), 0.45);
  r.membw_samples = {20.0, 20.5, 20.9};  // within 5%: the mean alone
  r.membw_gbps = 20.4;
  EXPECT_NE(format_rows({r}, "md").find("% of 20.4 |"), std::string::npos) << format_rows({r}, "md");
  r.membw_samples = {20.0, 0.0, 40.0};  // a run without a reading beside it is left out
  EXPECT_DOUBLE_EQ(r.bw_fraction(), (0.5 + 0.35) / 2);
  r.membw_samples = {20.0};  // not one per run: the averages' ratio
  EXPECT_DOUBLE_EQ(r.bw_fraction(), 12.0 / 20.4);
  r.membw_samples.clear();
  r.membw_gbps = 0.0;
  EXPECT_DOUBLE_EQ(r.bw_fraction(), 0.0);
}

TEST(BenchMembw, MeasuresAPositiveBandwidth) {
  const double gbps = measure_read_bandwidth(1, size_t{16} << 20, 2);
  EXPECT_GT(gbps, 0.1);
}

}  // namespace
}  // namespace bitnet::bench
