#include "model/tokenizer/pretokenize.h"

#include <array>
#include <cstdint>
#include <string>

#include "model/tokenizer/unicode.h"

namespace bitnet::tok {

Result<PreTokenizerConfig> parse_pre_tokenizer(std::string_view pre) {
  // Names from llama.cpp's llama_vocab::impl::load for the pre types sharing these regexes.
  static constexpr std::array<std::string_view, 9> kLlama3 = {
      "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1",
      "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"};
  static constexpr std::array<std::string_view, 2> kLlama3Regex = {"dbrx", "smaug-bpe"};
  static constexpr std::array<std::string_view, 3> kQwen2 = {"qwen2", "deepseek-r1-qwen", "megrez"};
  static constexpr std::array<std::string_view, 9> kGpt2 = {
      "gpt-2", "phi-2", "gigachat", "a.x-4.0", "mellum", "modern-bert", "exaone4", "mpt", "olmo"};
  static constexpr std::array<std::string_view, 7> kDigitsThenGpt2 = {
      "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"};
  const auto in = [&](const auto& names) {
    for (std::string_view n : names) {
      if (n == pre) return true;
    }
    return false;
  };
  if (in(kLlama3)) return PreTokenizerConfig{PreTokenizer::kLlama3, true, true};
  if (in(kLlama3Regex)) return PreTokenizerConfig{PreTokenizer::kLlama3, false, false};
  if (in(kQwen2)) return PreTokenizerConfig{PreTokenizer::kQwen2, false, false};
  if (in(kGpt2)) return PreTokenizerConfig{PreTokenizer::kGpt2, false, false};
  if (in(kDigitsThenGpt2)) return PreTokenizerConfig{PreTokenizer::kDigitsThenGpt2, false, false};
  if (pre.empty() || pre == "default") return PreTokenizerConfig{};
  return unsupported("BPE pre-tokenizer '" + std::string(pre) +
                     "' is not supported (supported: llama-bpe, qwen2, gpt-2, smollm and their aliases, default)");
}

namespace {

constexpr uint32_t kNoCpt = 0xFFFFFFFF;

bool is_r_or_n(uint32_t c) { return c == '\r' || c == '\n'; }

uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; }

// One chunk [begin, end) of the text's code points; the scanners emit word lengths.
// Reads past `end` see no code point and no flags, like llama.cpp's OUT_OF_RANGE.
struct Chunk {
  const std::vector<uint32_t>& cpts;
  const std::vector<uint16_t>& flags;
  size_t begin;
  size_t end;
  std::vector<size_t>& out;
  size_t prev = begin;

  uint32_t cpt(size_t i) const { return i < end ? cpts[i] : kNoCpt; }
  uint16_t flag(size_t i) const { return i < end ? flags[i] : 0; }
  // Ends the current word at `e`; returns its length (0 words are dropped).
  size_t emit(size_t e) {
    const size_t len = e - prev;
    if (len > 0) out.push_back(len);
    prev = e;
    return len;
  }
  // 's 't 'm 'd 're 've 'll at `pos`, case-folded or not; returns its length or 0.
  size_t contraction(size_t pos, bool fold) const {
    if (cpt(pos) != '\'' || pos + 1 >= end) return 0;
    const auto low = [&](uint32_t c) { return fold ? ascii_lower(c) : c; };
    const uint32_t c1 = low(cpt(pos + 1));
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (pos + 2 >= end) return 0;
    const uint32_t c2 = low(cpt(pos + 2));
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
  }
};

constexpr uint16_t kWordish = kCptWhitespace | kCptLetter | kCptNumber;

// Llama 3's regex; numbers in runs of up to max_digits (3; Qwen2: 1).
void split_llama3(Chunk& c, size_t max_digits) {
  size_t pos = c.begin;
  while (pos < c.end) {
    const uint32_t cpt = c.cpt(pos);
    const uint16_t f = c.flag(pos);
    if (const size_t n = c.contraction(pos, /*fold=*/true)) {
      pos += c.emit(pos + n);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_r_or_n(cpt) && !(f & kCptNumber) && ((f | c.flag(pos + 1)) & kCptLetter)) {
      ++pos;
      while (c.flag(pos) & kCptLetter) ++pos;
      c.emit(pos);
      continue;
    }
    // \p{N}{1,max_digits}
    if (f & kCptNumber) {
      size_t ini = pos;
      while (c.flag(pos) & kCptNumber) {
        if (++pos - ini >= max_digits) {
          c.emit(pos);
          ini = pos;
        }
      }
      c.emit(pos);
      continue;
    }
    // ' '?[^\s\p{L}\p{N}]+[\r\n]*
    uint16_t f2 = cpt == ' ' ? c.flag(pos + 1) : f;
    if (!(f2 & kWordish) && f != 0) {
      pos += (cpt == ' ');
      while (!(f2 & kWordish) && f2 != 0) f2 = c.flag(++pos);
      while (is_r_or_n(c.cpt(pos))) ++pos;
      c.emit(pos);
      continue;
    }
    size_t n_ws = 0;
    size_t last_nl_end = 0;  // one past the last \r or \n of the whitespace run; 0 if none
    while (c.flag(pos + n_ws) & kCptWhitespace) {
      if (is_r_or_n(c.cpt(pos + n_ws))) last_nl_end = pos + n_ws + 1;
      ++n_ws;
    }
    if (last_nl_end > 0) {  // \s*[\r\n]+
      pos = last_nl_end;
      c.emit(pos);
    } else if (n_ws > 1 && pos + n_ws < c.end) {  // \s+(?!\S): leave one for the next word
      pos += n_ws - 1;
      c.emit(pos);
    } else if (n_ws > 0) {  // \s+
      pos += n_ws;
      c.emit(pos);
    } else {
      c.emit(++pos);
    }
  }
}

void split_gpt2(Chunk& c) {
  size_t pos = c.begin;
  while (pos < c.end) {
    const uint32_t cpt = c.cpt(pos);
    const uint16_t f = c.flag(pos);
    if (const size_t n = c.contraction(pos, /*fold=*/false)) {
      pos += c.emit(pos + n);
      continue;
    }
    // ' '?\p{L}+ | ' '?\p{N}+ | ' '?[^\s\p{L}\p{N}]+
    uint16_t f2 = cpt == ' ' ? c.flag(pos + 1) : f;
    const auto run = [&](auto in_class) {
      pos += (cpt == ' ');
      while (in_class(f2)) f2 = c.flag(++pos);
      c.emit(pos);
    };
    if (f2 & kCptLetter) {
      run([](uint16_t g) { return (g & kCptLetter) != 0; });
      continue;
    }
    if (f2 & kCptNumber) {
      run([](uint16_t g) { return (g & kCptNumber) != 0; });
      continue;
    }
    if (!(f2 & kWordish) && f2 != 0) {
      run([](uint16_t g) { return !(g & kWordish) && g != 0; });
      continue;
    }
    size_t n_ws = 0;
    while (c.flag(pos + n_ws) & kCptWhitespace) ++n_ws;
    if (n_ws > 1 && pos + n_ws < c.end) {  // \s+(?!\S)
      pos += n_ws - 1;
      c.emit(pos);
    } else if (n_ws > 0) {
      pos += n_ws;
      c.emit(pos);
    } else {
      c.emit(++pos);
    }
  }
}

// Matches of `X+` and the gaps between them each become a word, as llama.cpp's std::regex
// fallback does for the "default" pre's class regexes.
template <class InClass>
void split_runs(Chunk& c, InClass in_class) {
  size_t pos = c.begin;
  while (pos < c.end) {
    const bool in = in_class(pos);
    while (pos < c.end && in_class(pos) == in) ++pos;
    c.emit(pos);
  }
}

// \p{N}: every number code point a word of its own; gaps are words too.
template <class IsNumber>
void split_each(Chunk& c, IsNumber is_number) {
  for (size_t pos = c.begin; pos < c.end; ++pos) {
    if (is_number(pos)) {
      c.emit(pos);
      c.emit(pos + 1);
    }
  }
  c.emit(c.end);
}

// [0-9][0-9][0-9], leftmost non-overlapping matches; gaps are words too.
void split_digit_triples(Chunk& c) {
  const auto digit = [&](size_t i) { return i < c.end && c.cpts[i] >= '0' && c.cpts[i] <= '9'; };
  size_t pos = c.begin;
  while (pos < c.end) {
    if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      c.emit(pos);
      pos += 3;
      c.emit(pos);
    } else {
      ++pos;
    }
  }
  c.emit(c.end);
}

// The ASCII side of [\p{P}\$\+<=>\^~\|] in llama.cpp's collapsed-text regex: its ASCII \p{P}
// list plus the extra symbols, which is every ASCII punctuation or symbol except '`'.
bool is_default_punct(uint32_t cpt, uint16_t f) {
  if (cpt < 0x80) {
    const bool alnum = (cpt >= '0' && cpt <= '9') || (cpt >= 'A' && cpt <= 'Z') ||
                       (cpt >= 'a' && cpt <= 'z');
    return cpt >= 0x21 && cpt <= 0x7E && !alnum && cpt != '`';
  }
  return (f & kCptPunctuation) && !(f & kCptWhitespace);
}

bool is_default_number(uint32_t cpt, uint16_t f) {
  if (cpt < 0x80) return cpt >= '0' && cpt <= '9';
  return (f & kCptNumber) && !(f & kCptWhitespace);
}

// Runs `split` over every chunk of `lengths` and returns the new word lengths.
template <class Split>
std::vector<size_t> resplit(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags,
                            const std::vector<size_t>& lengths, Split split) {
  std::vector<size_t> out;
  out.reserve(lengths.size());
  size_t begin = 0;
  for (size_t len : lengths) {
    Chunk c{cpts, flags, begin, begin + len, out};
    split(c);
    begin += len;
  }
  return out;
}

}  // namespace

void pretokenize(PreTokenizer pre, std::string_view text, std::vector<std::string>& words) {
  const std::vector<uint32_t> cpts = decode_utf8(text);
  if (cpts.empty()) return;
  std::vector<uint16_t> flags(cpts.size());
  for (size_t i = 0; i < cpts.size(); ++i) flags[i] = cpt_flags(cpts[i]);

  std::vector<size_t> lengths = {cpts.size()};
  switch (pre) {
    case PreTokenizer::kLlama3:
      lengths = resplit(cpts, flags, lengths, [](Chunk& c) { split_llama3(c, 3); });
      break;
    case PreTokenizer::kQwen2:
      lengths = resplit(cpts, flags, lengths, [](Chunk& c) { split_llama3(c, 1); });
      break;
    case PreTokenizer::kGpt2:
      lengths = resplit(cpts, flags, lengths, split_gpt2);
      break;
    case PreTokenizer::kDigitsThenGpt2:
      lengths = resplit(cpts, flags, lengths, [&](Chunk& c) {
        split_each(c, [&](size_t i) { return is_default_number(cpts[i], flags[i]); });
      });
      lengths = resplit(cpts, flags, lengths, split_gpt2);
      break;
    case PreTokenizer::kDefault:
      lengths = resplit(cpts, flags, lengths, [&](Chunk& c) {
        split_runs(c, [&](size_t i) { return is_default_punct(cpts[i], flags[i]); });
      });
      lengths = resplit(cpts, flags, lengths, split_gpt2);
      lengths = resplit(cpts, flags, lengths, [&](Chunk& c) {
        split_runs(c, [&](size_t i) { return is_default_number(cpts[i], flags[i]); });
      });
      lengths = resplit(cpts, flags, lengths, split_digit_triples);
      break;
  }

  // Each word: code points back to UTF-8 (U+FFFD for what was invalid), then every byte as
  // its GPT-2 character.
  std::string utf8;
  size_t begin = 0;
  for (size_t len : lengths) {
    utf8.clear();
    for (size_t i = begin; i < begin + len; ++i) append_utf8(utf8, cpts[i]);
    std::string word;
    word.reserve(utf8.size() * 2);
    for (char b : utf8) word += byte_to_unicode(static_cast<uint8_t>(b));
    words.push_back(std::move(word));
    begin += len;
  }
}

}  // namespace bitnet::tok
