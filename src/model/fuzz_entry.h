// The body of the model fuzz target (tests/fuzz/fuzz_model.cpp, libFuzzer) and of the
// mutation test that runs it under plain ctest (fuzz_test.cpp): one byte string is parsed as a
// GGUF file, then the network and a tokenizer are built from it, as Model::load does.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bitnet {

// A network (Network::from_gguf) that loads must give a graph that hal::validate_graph accepts
// (or refuses as unsupported) and weights whose statistics can be read; a tokenizer that loads
// must encode and decode. Every refusal must be a well-formed error that is not kInternal. Aborts
// (BITNET_CHECK) on a broken invariant; a malformed file is never a crash. Returns what was
// built: kModelBuilt | kTokenizerBuilt, 0 for neither.
inline constexpr int kModelBuilt = 1;
inline constexpr int kTokenizerBuilt = 2;
int model_fuzz_one(const uint8_t* data, size_t size);

}  // namespace bitnet
