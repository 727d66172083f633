// libFuzzer target over the OpenAI request body parser (src/server/fuzz_entry.cpp).
#include <cstddef>
#include <cstdint>

#include "server/fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bitnet::server::request_fuzz_one(data, size);
  return 0;
}
