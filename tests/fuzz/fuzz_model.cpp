// libFuzzer target over GGUF parsing, model and tokenizer construction from the same bytes
// (src/model/fuzz_entry.cpp).
#include <cstddef>
#include <cstdint>

#include "model/fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)bitnet::model_fuzz_one(data, size);
  return 0;
}
