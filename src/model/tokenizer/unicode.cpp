#include "model/tokenizer/unicode.h"

#include <unicode/uchar.h>

#include <array>

namespace bitnet::tok {

size_t utf8_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

std::vector<uint32_t> decode_utf8(std::string_view text) {
  std::vector<uint32_t> cpts;
  cpts.reserve(text.size());
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const auto is_cont = [&](size_t i) { return i < text.size() && (byte(i) & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t b0 = byte(i);
    uint32_t cpt = kReplacementChar;
    size_t n = 1;
    if (b0 < 0x80) {
      cpt = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      if (is_cont(i + 1)) {
        cpt = (uint32_t(b0 & 0x1F) << 6) | (byte(i + 1) & 0x3F);
        n = 2;
      }
    } else if ((b0 & 0xF0) == 0xE0) {
      if (is_cont(i + 1) && is_cont(i + 2)) {
        cpt = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(byte(i + 1) & 0x3F) << 6) |
              (byte(i + 2) & 0x3F);
        n = 3;
      }
    } else if ((b0 & 0xF8) == 0xF0) {
      if (is_cont(i + 1) && is_cont(i + 2) && is_cont(i + 3)) {
        const uint32_t v = (uint32_t(b0 & 0x07) << 18) | (uint32_t(byte(i + 1) & 0x3F) << 12) |
                           (uint32_t(byte(i + 2) & 0x3F) << 6) | (byte(i + 3) & 0x3F);
        // llama.cpp decodes these but then throws when re-encoding; we treat them as invalid.
        if (v <= 0x10FFFF) {
          cpt = v;
          n = 4;
        }
      }
    }
    cpts.push_back(cpt);
    i += n;
  }
  return cpts;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt > 0x10FFFF) cpt = kReplacementChar;
  if (cpt <= 0x7F) {
    out.push_back(char(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(char(0xC0 | (cpt >> 6)));
    out.push_back(char(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(char(0xE0 | (cpt >> 12)));
    out.push_back(char(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cpt >> 18)));
    out.push_back(char(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cpt & 0x3F)));
  }
}

namespace {

bool is_whitespace(uint32_t cpt) {
  // The White_Space property (PropList.txt), the set llama.cpp's unicode-data.cpp lists.
  return (cpt >= 0x09 && cpt <= 0x0D) || cpt == 0x20 || cpt == 0x85 || cpt == 0xA0 ||
         cpt == 0x1680 || (cpt >= 0x2000 && cpt <= 0x200A) || cpt == 0x2028 || cpt == 0x2029 ||
         cpt == 0x202F || cpt == 0x205F || cpt == 0x3000;
}

uint16_t category_flag(uint32_t cpt) {
  switch (u_charType(static_cast<UChar32>(cpt))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return kCptLetter;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      return kCptMark;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return kCptNumber;
    case U_SPACE_SEPARATOR:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
      return kCptSeparator;
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      return kCptPunctuation;
    case U_MATH_SYMBOL:
    case U_CURRENCY_SYMBOL:
    case U_MODIFIER_SYMBOL:
    case U_OTHER_SYMBOL:
      return kCptSymbol;
    default:  // Cc, Cf, Co, Cs and unassigned (Cn): llama.cpp's tables file Cn under \p{C}
      return kCptControl;
  }
}

// The bytes GPT-2 keeps as themselves: '!'..'~', '¡'..'¬', '®'..'ÿ'.
constexpr bool is_printable_byte(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  std::array<std::string, 256> to_text;
  std::array<int16_t, 512> from_cpt;  // code points < 512 -> byte, else -1
};

const ByteTables& byte_tables() {
  static const ByteTables tables = [] {
    ByteTables t;
    t.from_cpt.fill(-1);
    uint32_t next = 256;  // the other bytes take U+0100.. in byte order
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = is_printable_byte(b) ? uint32_t(b) : next++;
      append_utf8(t.to_text[b], cpt);
      t.from_cpt[cpt] = int16_t(b);
    }
    return t;
  }();
  return tables;
}

}  // namespace

uint16_t cpt_flags(uint32_t cpt) {
  if (cpt > 0x10FFFF) return kCptUndefined;
  const uint16_t ws = is_whitespace(cpt) ? kCptWhitespace : 0;
  return uint16_t(category_flag(cpt) | ws);
}

std::string_view byte_to_unicode(uint8_t byte) { return byte_tables().to_text[byte]; }

int unicode_to_byte(uint32_t cpt) {
  return cpt < 512 ? byte_tables().from_cpt[cpt] : -1;
}

}  // namespace bitnet::tok
