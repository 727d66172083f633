#include <fmt/format.h>

#include <cmath>

#include "bitnet/engine.h"

namespace bitnet {

// As llama.cpp's perplexity(): tokens = BOS + text; n_chunk = n_tokens / n_ctx; in each chunk
// the first token is replaced by BOS, the KV cache starts empty, and the tokens of the second
// half (positions n_ctx/2 .. n_ctx-2 predicting the next) are scored.
Result<PerplexityResult> perplexity(Engine& engine, std::string_view text, int64_t n_ctx,
                                    const std::function<void(int64_t, double)>& progress) {
  if (n_ctx <= 0) n_ctx = engine.n_ctx();
  if (n_ctx < 8) return invalid_argument(fmt::format("context {} is too small for perplexity", n_ctx));
  if (n_ctx > engine.n_ctx()) {
    return invalid_argument(fmt::format("perplexity context {} exceeds the engine's context {}", n_ctx, engine.n_ctx()));
  }
  const bool add_bos = engine.add_bos_default();
  const std::vector<int32_t> tokens = engine.tokenize(text, add_bos, /*parse_special=*/false);
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < 2 * n_ctx) {
    return invalid_argument(fmt::format("the text has {} tokens; perplexity with a context of {} needs "
                                        "at least {}", n_tokens, n_ctx, 2 * n_ctx));
  }
  PerplexityResult r;
  r.n_chunks = n_tokens / n_ctx;
  const int64_t n_vocab = engine.n_vocab();
  const int64_t first = n_ctx / 2;
  double nll = 0.0;
  for (int64_t chunk = 0; chunk < r.n_chunks; ++chunk) {
    std::vector<int32_t> batch(tokens.begin() + chunk * n_ctx, tokens.begin() + (chunk + 1) * n_ctx);
    if (add_bos && engine.bos_id()) batch[0] = *engine.bos_id();
    engine.reset();
    BITNET_ASSIGN_OR_RETURN(std::vector<float> logits, engine.eval(batch, true));
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + j * n_vocab;
      float max_logit = row[0];
      for (int64_t v = 1; v < n_vocab; ++v) max_logit = std::max(max_logit, row[v]);
      double sum = 0.0;
      for (int64_t v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v] - max_logit));
      const int32_t next = batch[static_cast<size_t>(j + 1)];
      nll += -(static_cast<double>(row[next] - max_logit) - std::log(sum));
      ++r.n_scored;
    }
    r.chunk_ppl.push_back(std::exp(nll / static_cast<double>(r.n_scored)));
    if (progress) progress(chunk, r.chunk_ppl.back());
  }
  r.ppl = r.chunk_ppl.back();
  engine.reset();
  return r;
}

}  // namespace bitnet
