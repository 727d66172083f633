// The public Tokenizer: special-token partitioning, the SPM/BPE dispatch and decoding, as
// llama.cpp's llama_vocab::impl::tokenize / detokenize.
#include "model/tokenizer/tokenizer.h"

#include <utility>

#include "model/tokenizer/vocab.h"

namespace bitnet {

struct Tokenizer::Impl {
  tok::Vocab vocab;
};

namespace {

// A piece of the input: raw text, or a special token found in it.
struct Fragment {
  int32_t id;  // -1 for text
  std::string_view text;
};

// llama.cpp's tokenizer_st_partition: each special token, longest first, splits every text
// fragment at its occurrences. Control and unknown tokens only count with parse_special;
// user-defined ones always do (as HF tokenizers' added tokens).
std::vector<Fragment> partition(const tok::Vocab& v, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, text});
  std::vector<Fragment> next;
  for (const int32_t id : v.special_ids) {
    if (!parse_special && (v.attrs[id] & (tok::kAttrControl | tok::kAttrUnknown))) continue;
    const std::string& special = v.texts[id];
    next.clear();
    bool found = false;
    for (const Fragment& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t at; (at = rest.find(special)) != std::string_view::npos;) {
        found = true;
        if (at > 0) next.push_back({-1, rest.substr(0, at)});
        next.push_back({id, {}});
        rest.remove_prefix(at + special.size());
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    if (found) std::swap(frags, next);
  }
  return frags;
}

std::string escape_spaces(std::string_view text, bool add_prefix) {
  std::string out;
  out.reserve(text.size() + text.size() / 2 + 3);
  if (add_prefix) out += "\xE2\x96\x81";
  for (char c : text) {
    if (c == ' ') {
      out += "\xE2\x96\x81";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::from_vocab(VocabData vocab) {
  auto built = tok::build_vocab(std::move(vocab));
  if (!built) return built.status().with_context("tokenizer vocabulary");
  auto impl = std::make_unique<Impl>();
  impl->vocab = std::move(built).value();
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  const tok::Vocab& v = impl_->vocab;
  std::vector<int32_t> out;
  if (add_bos && v.bos) out.push_back(*v.bos);
  // SPM: a text fragment gets the space prefix at the start and after each special token.
  bool after_special = true;
  for (const Fragment& f : partition(v, text, parse_special)) {
    if (f.id >= 0) {
      out.push_back(f.id);
      after_special = true;
      continue;
    }
    if (v.kind == TokenizerKind::kSpm) {
      tok::spm_encode(v, escape_spaces(f.text, v.add_space_prefix && after_special), out);
    } else {
      tok::bpe_encode(v, f.text, out);
    }
    after_special = false;
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return {};
  return impl_->vocab.pieces[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  const tok::Vocab& v = impl_->vocab;
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab()) continue;
    std::string_view piece = v.pieces[ids[i]];
    // llama.cpp's detokenize drops the space prefix from the first token only.
    if (i == 0 && v.add_space_prefix && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
    out += piece;
  }
  return out;
}

TokenizerKind Tokenizer::kind() const { return impl_->vocab.kind; }
int32_t Tokenizer::n_vocab() const { return impl_->vocab.n_tokens(); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->vocab.bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->vocab.eos; }
bool Tokenizer::add_bos_default() const { return impl_->vocab.add_bos; }

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->vocab.eog[id] != 0;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || id >= n_vocab()) return kEmpty;
  return impl_->vocab.texts[id];
}

}  // namespace bitnet
