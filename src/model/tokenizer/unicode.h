// Unicode helpers for the tokenizers: UTF-8 decoding with llama.cpp's error handling, code point
// classes for the pre-tokenizer regexes, and GPT-2's byte <-> printable-character mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bitnet::tok {

// Code point classes. A position past the end of a chunk has no flags (0); every real code
// point has at least one bit set, which the pre-tokenizers rely on (llama.cpp's as_uint() != 0).
enum CptFlag : uint16_t {
  kCptUndefined = 1 << 0,    // beyond U+10FFFF
  kCptNumber = 1 << 1,       // \p{N}
  kCptLetter = 1 << 2,       // \p{L}
  kCptSeparator = 1 << 3,    // \p{Z}
  kCptMark = 1 << 4,         // \p{M}
  kCptPunctuation = 1 << 5,  // \p{P}
  kCptSymbol = 1 << 6,       // \p{S}
  kCptControl = 1 << 7,      // \p{C}, including unassigned code points
  kCptWhitespace = 1 << 8,   // \s as llama.cpp defines it (the Unicode White_Space set)
};

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Bytes in the UTF-8 sequence that `lead` starts, from its high nibble alone (1 for stray
// continuation bytes), as llama.cpp's unicode_len_utf8; callers clamp to the bytes left.
size_t utf8_len(uint8_t lead);

// Decodes UTF-8 the way llama.cpp does: an invalid or truncated sequence becomes one U+FFFD
// and decoding resumes at the next byte. Overlong forms and surrogates decode as written
// (llama.cpp does not reject them); values above U+10FFFF become U+FFFD.
std::vector<uint32_t> decode_utf8(std::string_view text);

void append_utf8(std::string& out, uint32_t cpt);

uint16_t cpt_flags(uint32_t cpt);

// GPT-2 bytes_to_unicode: every byte as a printable character, returned as its UTF-8 text.
std::string_view byte_to_unicode(uint8_t byte);
// The inverse: the byte a code point stands for, or -1 when it is not one of the 256.
int unicode_to_byte(uint32_t cpt);

}  // namespace bitnet::tok
