#include "golden_util.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace bitnet::test {

bool read_golden(const std::filesystem::path& stem, GoldenLogits& out, std::string& error) {
  const std::string txt_path = stem.string() + ".logits.txt";
  const std::string f32_path = stem.string() + ".logits.f32";
  std::ifstream txt(txt_path);
  if (!txt) {
    error = "missing " + txt_path;
    return false;
  }
  std::string word;
  while (txt >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = word.substr(0, eq);
    const std::string value = word.substr(eq + 1);
    if (key == "n_vocab") out.n_vocab = std::stoll(value);
    if (key == "n_tokens") out.n_tokens = std::stoll(value);
    if (key == "model_sha256") out.model_sha256 = value;
    if (key == "ids") {
      std::stringstream ss(value);
      std::string id;
      while (std::getline(ss, id, ',')) out.ids.push_back(std::stoi(id));
    }
  }
  if (out.n_vocab <= 0 || out.n_tokens != static_cast<int64_t>(out.ids.size())) {
    error = "malformed " + txt_path;
    return false;
  }
  std::ifstream f32(f32_path, std::ios::binary);
  if (!f32) {
    error = "missing " + f32_path;
    return false;
  }
  out.logits.resize(static_cast<size_t>(out.n_vocab * out.n_tokens));
  f32.read(reinterpret_cast<char*>(out.logits.data()), static_cast<std::streamsize>(out.logits.size() * sizeof(float)));
  if (f32.gcount() != static_cast<std::streamsize>(out.logits.size() * sizeof(float))) {
    error = "short " + f32_path;
    return false;
  }
  return true;
}

LogitStats compare_logits(const std::vector<float>& ours, const std::vector<float>& ref, int64_t n_vocab) {
  LogitStats s;
  const int64_t n_rows = static_cast<int64_t>(ref.size()) / n_vocab;
  double sum_abs = 0.0;
  double sum_corr = 0.0;
  int64_t same_argmax = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* a = ours.data() + r * n_vocab;
    const float* b = ref.data() + r * n_vocab;
    double ma = 0, mb = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      ma += a[i];
      mb += b[i];
      const double d = std::abs(static_cast<double>(a[i]) - b[i]);
      s.max_abs_diff = std::max(s.max_abs_diff, d);
      sum_abs += d;
    }
    ma /= static_cast<double>(n_vocab);
    mb /= static_cast<double>(n_vocab);
    double sab = 0, saa = 0, sbb = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      sab += (a[i] - ma) * (b[i] - mb);
      saa += (a[i] - ma) * (a[i] - ma);
      sbb += (b[i] - mb) * (b[i] - mb);
    }
    const double corr = sab / std::sqrt(saa * sbb);
    s.min_row_correlation = std::min(s.min_row_correlation, corr);
    sum_corr += corr;
    same_argmax += (std::max_element(a, a + n_vocab) - a) == (std::max_element(b, b + n_vocab) - b);
  }
  s.mean_abs_diff = sum_abs / static_cast<double>(ref.size());
  s.argmax_agreement = static_cast<double>(same_argmax) / static_cast<double>(n_rows);
  s.mean_row_correlation = n_rows > 0 ? sum_corr / static_cast<double>(n_rows) : 1.0;
  return s;
}

}  // namespace bitnet::test
