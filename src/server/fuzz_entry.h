// The body of the server-request fuzz target (tests/fuzz/fuzz_request.cpp, libFuzzer)
// and of the mutation test that runs it under plain ctest: request bytes in, the response the
// server would send out, no socket.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bitnet::server {

// Parses `data` as the body of POST /v1/completions and of POST /v1/chat/completions; a valid
// request must come back within its bounds, an invalid one as a well-formed OpenAI error
// object. Then parses it as a model's reply for tool calls (tool_calls.h), whole and streamed.
// Aborts (BITNET_CHECK) on a broken invariant; malformed input is never a crash.
void request_fuzz_one(const uint8_t* data, size_t size);

}  // namespace bitnet::server
