// Reading ../shared/golden: logits files ([n_tokens][n_vocab] float32) and their .txt headers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bitnet::test {

inline std::filesystem::path shared_dir() { return BITNET_SHARED_DIR; }

struct GoldenLogits {
  int64_t n_vocab = 0;
  int64_t n_tokens = 0;
  std::vector<int32_t> ids;
  std::vector<float> logits;  // n_tokens * n_vocab
  std::string model_sha256;   // of the model file, where the .txt names it
};

// Reads `<stem>.logits.txt` and `<stem>.logits.f32`; returns false with `error` set on failure.
bool read_golden(const std::filesystem::path& stem, GoldenLogits& out, std::string& error);

struct LogitStats {
  double max_abs_diff = 0.0;
  double mean_abs_diff = 0.0;
  double min_row_correlation = 1.0;
  double mean_row_correlation = 1.0;
  double argmax_agreement = 0.0;  // fraction of rows with the same argmax
};

LogitStats compare_logits(const std::vector<float>& ours, const std::vector<float>& ref, int64_t n_vocab);

}  // namespace bitnet::test
