// libFuzzer target over the chat template parser and renderer (see README.md in this folder).
#include <cstddef>
#include <cstdint>

#include "chat/fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bitnet::chat::chat_template_fuzz_one(data, size);
  return 0;
}
