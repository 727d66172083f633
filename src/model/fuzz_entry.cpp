#include "model/fuzz_entry.h"

#include <span>
#include <string>
#include <vector>

#include "core/check.h"
#include "gguf/gguf.h"
#include "hal/validate.h"
#include "model/model.h"
#include "model/tokenizer/tokenizer.h"
#include "model/weight_check.h"

namespace bitnet {
namespace {

void check_refusal(const Status& s) {
  BITNET_CHECK(!s.ok() && !s.message().empty());
  BITNET_CHECK(s.code() != StatusCode::kInternal);
}

void check_model(const Network& net) {
  volatile size_t sink = find_suspicious_weights(net).size();
  const ModelConfig& c = net.config();
  BITNET_CHECK(c.n_vocab > 0 && c.n_layer > 0 && c.n_embd > 0);
  // Two tokens at positions 0 and 1, the first and last of the vocabulary, every row's logits.
  const hal::Graph graph = net.build_graph(2, 0, LogitRows::kAll);
  const std::vector<int32_t> tokens = {0, static_cast<int32_t>(c.n_vocab - 1)};
  hal::KvShape kv;
  kv.n_layer = static_cast<int32_t>(c.n_layer);
  kv.n_ctx = 8;
  kv.n_embd_kv = c.n_embd_kv();
  const Status s = hal::validate_graph(graph, tokens, static_cast<size_t>(2 * c.n_vocab),
                                       hal::weight_shapes(net.weight_table()), kv);
  BITNET_CHECK(s.ok() || s.code() == StatusCode::kUnsupported);
  (void)sink;
}

void check_tokenizer(const Tokenizer& tok) {
  BITNET_CHECK(tok.n_vocab() > 0);
  const std::vector<int32_t> ids = tok.encode("Hello world <|eot_id|> \xC3\xA9\xFF", true, true);
  for (int32_t id : ids) BITNET_CHECK(id >= 0 && id < tok.n_vocab());
  volatile size_t sink = tok.decode(ids).size();
  for (int32_t id = 0; id < tok.n_vocab() && id < 512; ++id) sink = sink + tok.token_to_piece(id).size();
  (void)sink;
}

}  // namespace

int model_fuzz_one(const uint8_t* data, size_t size) {
  auto file = gguf::File::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file.ok()) return 0;  // the parser's own errors are checked by gguf_fuzz_one
  int built = 0;
  auto net = Network::from_gguf(*file);
  if (net.ok()) {
    check_model(*net);
    built |= kModelBuilt;
  } else {
    check_refusal(net.status());
  }
  auto tok = Tokenizer::from_gguf(*file);
  if (tok.ok()) {
    check_tokenizer(*tok);
    built |= kTokenizerBuilt;
  } else {
    check_refusal(tok.status());
  }
  return built;
}

}  // namespace bitnet
