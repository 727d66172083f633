// SentencePiece-style BPE, following llama.cpp's llm_tokenizer_spm_session (itself after
// SentencePiece's bpe_model.cc): start from UTF-8 characters, repeatedly merge the adjacent
// pair whose concatenation is the highest-scoring token, then map the pieces to ids.
#include <queue>
#include <unordered_map>
#include <utility>

#include "model/tokenizer/unicode.h"
#include "model/tokenizer/vocab.h"

namespace bitnet::tok {
namespace {

struct Symbol {
  int prev;       // index of the previous live symbol, -1 at the start
  int next;       // index of the next live symbol, -1 at the end
  size_t offset;  // into the text
  size_t n;       // bytes; 0 once merged into the symbol on its left
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;  // bytes of left + right when queued; a mismatch later means it is stale
};

// Highest score first; among equal scores the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void encode(std::vector<int32_t>& out) {
    for (size_t offset = 0; offset < text_.size();) {
      const size_t n = std::min(utf8_len(uint8_t(text_[offset])), text_.size() - offset);
      const int index = int(symbols_.size());
      offset += n;
      symbols_.push_back({index - 1, offset == text_.size() ? -1 : index + 1, offset - n, n});
    }
    for (int i = 1; i < int(symbols_.size()); ++i) try_add_bigram(i - 1, i);

    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[b.left];
      Symbol& right = symbols_[b.right];
      if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      try_add_bigram(left.prev, b.left);
      try_add_bigram(b.left, left.next);
    }

    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) {
      resegment(symbols_[i], out);
    }
  }

 private:
  std::string_view text_of(const Symbol& s) const { return text_.substr(s.offset, s.n); }

  void try_add_bigram(int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[left];
    const std::string_view joined = text_.substr(l.offset, l.n + symbols_[right].n);
    const int32_t id = vocab_.find(joined);
    if (id < 0) return;
    queue_.push({left, right, vocab_.scores[id], joined.size()});
    // The latest pair that produced this text wins, as in llama.cpp's rev_merge.
    rev_merge_[joined] = {left, right};
  }

  // A piece that is a token is emitted; one that is not is split back into the pair that
  // formed it, and unmergeable characters fall back to byte tokens (or <unk>).
  void resegment(const Symbol& s, std::vector<int32_t>& out) const {
    const std::string_view text = text_of(s);
    const int32_t id = vocab_.find(text);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    const auto it = rev_merge_.find(text);
    if (it == rev_merge_.end()) {
      for (char c : text) {
        const int32_t byte_id = vocab_.byte_ids[uint8_t(c)];
        if (byte_id >= 0) {
          out.push_back(byte_id);
        } else if (vocab_.unk) {
          out.push_back(*vocab_.unk);
        }
      }
      return;
    }
    resegment(symbols_[it->second.first], out);
    resegment(symbols_[it->second.second], out);
  }

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
  std::unordered_map<std::string_view, std::pair<int, int>> rev_merge_;
};

}  // namespace

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  SpmSession(vocab, text).encode(out);
}

}  // namespace bitnet::tok
