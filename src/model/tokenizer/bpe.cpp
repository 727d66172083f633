// Byte-level BPE, following llama.cpp's llm_tokenizer_bpe_session: each pre-tokenized word
// starts as its characters and the adjacent pair with the lowest merge rank is merged until
// none is left. Symbols carry token ids, so a merge is a hash lookup on two ints.
#include <queue>

#include "model/tokenizer/unicode.h"
#include "model/tokenizer/vocab.h"

namespace bitnet::tok {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t offset;  // into the word
  size_t n;       // bytes; 0 once merged into the symbol on its left
  int32_t id;     // the token this text is, or -1
};

struct Bigram {
  int left;
  int right;
  int32_t left_id;   // ids when queued; a mismatch later means the pair is stale
  int32_t right_id;
  Merge merge;
};

// Lowest rank first; among equal ranks the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.merge.rank > b.merge.rank || (a.merge.rank == b.merge.rank && a.left > b.left);
  }
};

class BpeSession {
 public:
  explicit BpeSession(const Vocab& vocab) : vocab_(vocab) {}

  void encode_word(std::string_view word, std::vector<int32_t>& out) {
    symbols_.clear();
    queue_ = {};
    const int32_t whole = vocab_.pre.ignore_merges ? vocab_.find(word) : -1;
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
    for (size_t offset = 0; offset < word.size();) {
      const size_t n = std::min(utf8_len(uint8_t(word[offset])), word.size() - offset);
      const int index = int(symbols_.size());
      offset += n;
      symbols_.push_back({index - 1, offset == word.size() ? -1 : index + 1, offset - n, n,
                          vocab_.find(word.substr(offset - n, n))});
    }
    for (int i = 1; i < int(symbols_.size()); ++i) try_add_bigram(i - 1, i);

    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[b.left];
      Symbol& right = symbols_[b.right];
      if (left.n == 0 || right.n == 0 || left.id != b.left_id || right.id != b.right_id) {
        continue;
      }
      left.n += right.n;
      left.id = b.merge.result;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      try_add_bigram(left.prev, b.left);
      try_add_bigram(b.left, left.next);
    }

    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) {
      const Symbol& s = symbols_[i];
      if (s.id >= 0) {
        out.push_back(s.id);
        continue;
      }
      // As llama.cpp: try each byte of the piece as a one-byte token. For byte-level text
      // this only finds anything in odd vocabularies; pieces that find nothing are dropped.
      for (char c : word.substr(s.offset, s.n)) {
        const int32_t id = vocab_.find(std::string_view(&c, 1));
        if (id >= 0) out.push_back(id);
      }
    }
  }

 private:
  void try_add_bigram(int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t left_id = symbols_[left].id;
    const int32_t right_id = symbols_[right].id;
    if (left_id < 0 || right_id < 0) return;
    if (const Merge* m = vocab_.find_merge(left_id, right_id)) {
      queue_.push({left, right, left_id, right_id, *m});
    }
  }

  const Vocab& vocab_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

}  // namespace

void bpe_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  std::vector<std::string> words;
  pretokenize(vocab.pre.split, text, words);
  BpeSession session(vocab);
  for (const std::string& word : words) session.encode_word(word, out);
}

}  // namespace bitnet::tok
