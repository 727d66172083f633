// The body of the tokenizer fuzz target (tests/fuzz/fuzz_tokenizer.cpp, libFuzzer) and of the
// mutation test that runs it under plain ctest (fuzz_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace bitnet {

// The first byte picks one of the fuzzed tokenizers (SPM with and without the space prefix,
// byte-level BPE under each pre-tokenizer family) and the encode flags; the rest is the text.
// Every id must lie in the vocabulary, and decode(encode(text)) must give valid UTF-8 text back
// (SPM: unless it holds a literal U+2581, or a user-defined token, after which SPM adds a space
// prefix, as llama.cpp). Invalid UTF-8 need not come back: BPE turns it into U+FFFD, and SPM
// splits text by the length its lead bytes announce, so a truncated sequence swallows the next
// bytes, e.g. the space marker after it, which then decodes as a literal U+2581 (as llama.cpp's
// SPM does). fuzz_test.cpp keeps both cases. Aborts (BITNET_CHECK) on a broken invariant.
void tokenizer_fuzz_one(const uint8_t* data, size_t size);

struct VocabData;
// An SPM vocabulary's first 259 tokens: <unk> <s> </s> (ids 0-2), then the 256 byte tokens
// <0x00> .. <0xFF> (ids 3-258), all scores 0; the fuzzed SPM vocabularies and their regression
// tests add pieces after them.
VocabData spm_byte_vocab();

}  // namespace bitnet
