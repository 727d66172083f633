// End to end on the project's own trained model (models/tiny-stories-b158.gguf, tools/train):
// the engine against the PyTorch reference that tools/train/export.py wrote next to the model
// (logits at prompt and decode positions, held-out perplexity), and the greedy text against the
// committed expected output. Needs no PyTorch and no ../shared.
//
// Tolerance. The reference (tools/train/model.py, frozen) computes every ternary linear the
// engine's way: the same int8 activation rule (s = (float)(127.0 / max(double max|x|, 1e-5)),
// round half to even), an exact integer dot, then / s * scale; the embedding / tied head is the
// file's F16. What differs is float summation order (rms_norm, attention, the head), i.e. ~1e-6
// relative. Such a difference can move one activation across a rounding boundary, which changes
// one int8 value by 1 and a logit by roughly 1e-3 (an estimate). Measured when the model was
// committed: max |diff| 7.6e-6 (prompt) and 3.8e-6 (decode). The bar, 2e-2, leaves room for a
// handful of such flips and still fails on any real defect; breaking the reference one way at a
// time (measured on the first, 400-step version of the model)
// moves the logits by: NORM instead of NEOX rope 5.5, no attn_sub_norm 7.1, no ffn_sub_norm
// 4.5, inverted weight scale 9.6, query head h reading KV head h % n_head_kv 14.
// Perplexity: 4.24198 (engine) vs 4.24166 (PyTorch), bar 1e-3 relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bitnet/engine.h"

namespace bitnet {
namespace {

constexpr double kMaxLogitDiff = 2e-2;
constexpr double kMaxPplRelDiff = 1e-3;

std::filesystem::path models_dir() { return std::filesystem::path(BITNET_SOURCE_DIR) / "models"; }
const char* const kStem = "tiny-stories-b158";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Reference {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> decode_ids;
  int64_t n_vocab = 0;
  int64_t ppl_ctx = 0;
  double ppl_torch = 0.0;
  std::string heldout;
  std::vector<float> logits;  // [prompt + decode][n_vocab]
};

Reference load_reference() {
  Reference r;
  const auto json = nlohmann::json::parse(read_file(models_dir() / (std::string(kStem) + ".ref.json")));
  r.prompt = json.at("prompt").get<std::string>();
  r.prompt_ids = json.at("prompt_ids").get<std::vector<int32_t>>();
  r.decode_ids = json.at("decode_ids").get<std::vector<int32_t>>();
  r.n_vocab = json.at("n_vocab").get<int64_t>();
  r.ppl_ctx = json.at("ppl_ctx").get<int64_t>();
  r.ppl_torch = json.at("ppl_torch").get<double>();
  r.heldout = read_file(models_dir() / json.at("heldout").get<std::string>());
  const std::string raw = read_file(models_dir() / (std::string(kStem) + ".ref-logits.f32"));
  r.logits.resize(raw.size() / sizeof(float));
  std::memcpy(r.logits.data(), raw.data(), r.logits.size() * sizeof(float));
  return r;
}

std::unique_ptr<Engine> load_model() {
  EngineOptions o;
  o.model_path = (models_dir() / (std::string(kStem) + ".gguf")).string();
  o.device = "cpu";
  // The reference keeps K and V in F32; an F16 cache (the default) moves the logits by up to
  // 0.15 here (its rounding flips int8 activations), past the bar that guards the rest.
  o.cache_type = "f32";
  auto engine = Engine::load(o);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return nullptr;
  return std::move(engine).value();
}

// max |a - b| over one row of n_vocab; also whether the argmax agrees.
double row_diff(const float* a, const float* b, int64_t n, bool* same_argmax) {
  double d = 0.0;
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; ++i) {
    d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
    if (a[i] > a[ia]) ia = i;
    if (b[i] > b[ib]) ib = i;
  }
  *same_argmax = ia == ib;
  return d;
}

TEST(TrainedModelTest, LogitsMatchPyTorchAtPromptAndDecodePositions) {
  const Reference ref = load_reference();
  auto engine = load_model();
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(engine->n_vocab(), ref.n_vocab);
  // The reference ids came from the engine's tokenizer when the model was exported.
  EXPECT_EQ(engine->tokenize(ref.prompt, /*add_bos=*/true, /*parse_special=*/false), ref.prompt_ids);
  const size_t n_rows = ref.prompt_ids.size() + ref.decode_ids.size();
  ASSERT_EQ(ref.logits.size(), n_rows * size_t(ref.n_vocab));

  // The prompt in one step, all rows.
  auto prompt = engine->eval(ref.prompt_ids, /*all_logits=*/true);
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  ASSERT_EQ(prompt->size(), ref.prompt_ids.size() * size_t(ref.n_vocab));
  double max_prompt = 0.0;
  for (size_t t = 0; t < ref.prompt_ids.size(); ++t) {
    bool same = false;
    max_prompt = std::max(max_prompt, row_diff(prompt->data() + t * ref.n_vocab,
                                               ref.logits.data() + t * ref.n_vocab, ref.n_vocab, &same));
    EXPECT_TRUE(same) << "prompt position " << t << ": argmax differs";
  }
  // Then one token at a time through the KV cache (the decode path).
  double max_decode = 0.0;
  for (size_t i = 0; i < ref.decode_ids.size(); ++i) {
    const int32_t id = ref.decode_ids[i];
    auto step = engine->eval(std::span<const int32_t>(&id, 1), /*all_logits=*/false);
    ASSERT_TRUE(step.ok()) << step.status().to_string();
    ASSERT_EQ(step->size(), size_t(ref.n_vocab));
    bool same = false;
    const size_t row = ref.prompt_ids.size() + i;
    max_decode = std::max(max_decode, row_diff(step->data(), ref.logits.data() + row * ref.n_vocab,
                                               ref.n_vocab, &same));
    EXPECT_TRUE(same) << "decode step " << i << ": argmax differs";
  }
  std::printf("vs PyTorch: max|diff| prompt %.3g (%zu positions), decode %.3g (%zu steps)\n", max_prompt,
              ref.prompt_ids.size(), max_decode, ref.decode_ids.size());
  EXPECT_LE(max_prompt, kMaxLogitDiff);
  EXPECT_LE(max_decode, kMaxLogitDiff);
}

TEST(TrainedModelTest, HeldOutPerplexityMatchesPyTorch) {
  const Reference ref = load_reference();
  auto engine = load_model();
  ASSERT_NE(engine, nullptr);
  auto r = perplexity(*engine, ref.heldout, ref.ppl_ctx, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::printf("held-out PPL: engine %.5f, PyTorch %.5f (%lld chunks of %lld)\n", r->ppl, ref.ppl_torch,
              static_cast<long long>(r->n_chunks), static_cast<long long>(ref.ppl_ctx));
  EXPECT_NEAR(r->ppl / ref.ppl_torch, 1.0, kMaxPplRelDiff);
}

std::string greedy(Engine& engine, const std::string& prompt, int64_t n_predict) {
  SamplingParams p;
  p.temperature = 0.0f;
  std::string out;
  const Status s = engine.generate(prompt, p, n_predict, [&](std::string_view piece) { out += piece; }, nullptr);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

// The expected text is the stdout of `bitnet run -m models/tiny-stories-b158.gguf -p "Once upon a
// time" -n 100 --temp 0 --cache-type f32` when the model was committed (the prompt, the generated text and the
// CLI's final newline): a regression guard for the whole generate path.
TEST(TrainedModelTest, GreedyTextIsTheCommittedOne) {
  auto engine = load_model();
  ASSERT_NE(engine, nullptr);
  const std::string expected = read_file(models_dir() / (std::string(kStem) + ".greedy.txt"));
  ASSERT_FALSE(expected.empty());
  const std::string prompt = "Once upon a time";
  EXPECT_EQ(prompt + greedy(*engine, prompt, 100) + "\n", expected);
}

// A light coherence check: English words of the TinyStories kind, in sentences. Every word of
// the greedy text must be a word of the held-out stories (a vocabulary of ~800 words that the
// model never trained on), and the text must hold several sentences.
TEST(TrainedModelTest, GreedyTextIsCoherentEnglish) {
  const Reference ref = load_reference();
  auto engine = load_model();
  ASSERT_NE(engine, nullptr);
  const std::string text = greedy(*engine, "Once upon a time", 100);
  auto words_of = [](const std::string& s) {
    std::vector<std::string> words;
    std::string w;
    for (char c : s) {
      if (std::isalpha(static_cast<unsigned char>(c))) {
        w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else if (!w.empty()) {
        words.push_back(w);
        w.clear();
      }
    }
    if (!w.empty()) words.push_back(w);
    return words;
  };
  const auto known_list = words_of(ref.heldout);
  const std::set<std::string> known(known_list.begin(), known_list.end());
  const auto words = words_of(text);
  ASSERT_GE(words.size(), 50u) << text;
  size_t n_known = 0;
  for (const auto& w : words) n_known += known.count(w);
  int n_sentences = 0;
  for (char c : text) n_sentences += (c == '.' || c == '!' || c == '?');
  EXPECT_GE(double(n_known) / double(words.size()), 0.95) << text;
  EXPECT_GE(n_sentences, 3) << text;
  for (char c : text) EXPECT_TRUE(c == '\n' || (c >= 32 && c < 127)) << "non-ASCII byte in " << text;
}

}  // namespace
}  // namespace bitnet
