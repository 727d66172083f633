// libFuzzer target over gguf::File::parse (see README.md in this folder).
#include <cstddef>
#include <cstdint>

#include "gguf/fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bitnet::gguf::gguf_fuzz_one(data, size);
  return 0;
}
