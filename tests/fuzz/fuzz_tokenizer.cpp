// libFuzzer target over tokenize/detokenize round trips (src/model/tokenizer/fuzz_entry.cpp).
#include <cstddef>
#include <cstdint>

#include "model/tokenizer/fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bitnet::tokenizer_fuzz_one(data, size);
  return 0;
}
