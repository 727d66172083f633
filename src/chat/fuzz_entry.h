// The body of the chat template fuzz target, shared by tests/fuzz/fuzz_chat_template.cpp
// (libFuzzer) and the mutation test that runs under plain ctest (fuzz_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace bitnet::chat {

// Parses `data` as a template (small limits) and renders it over a few conversations. Every
// outcome must be text within the output limit or a well-formed error (invalid argument,
// out of range, out of memory with a "chat template" message); aborts (BITNET_CHECK)
// otherwise. A hostile template is never a crash or a hang.
void chat_template_fuzz_one(const uint8_t* data, size_t size);

}  // namespace bitnet::chat
