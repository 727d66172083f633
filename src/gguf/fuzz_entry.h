// The body of the GGUF fuzz target, shared by tests/fuzz/fuzz_gguf.cpp (libFuzzer) and the
// mutation test that runs under plain ctest.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bitnet::gguf {

// Parses `data` as a GGUF file. On success it reads every value through the typed getters and
// touches the first and last byte of every tensor, so that a sanitizer sees any view that
// points outside the input; on failure it checks the Status is a well-formed error. Aborts
// (BITNET_CHECK) on a broken invariant; a malformed input is never a crash.
void gguf_fuzz_one(const uint8_t* data, size_t size);

}  // namespace bitnet::gguf
