// libFuzzer target over the server's request handling: raw bytes of one connection in, the
// response out, no socket (src/server/http_fuzz.cpp), over the repo's trained model.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "server/http_fuzz.h"

namespace {
// One per process: loading the model per input would dominate. Never destroyed: when an
// input's exchange returns, none of its generations is still running (the server waits for
// them; HttpFuzz.NoGenerationOutlivesItsResponse), so exit() finds the worker idle.
bitnet::server::FuzzServer* g_server = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto s = bitnet::server::FuzzServer::create(BITNET_SOURCE_DIR "/models/tiny-stories-b158.gguf");
  if (!s.ok()) {
    std::fprintf(stderr, "fuzz_server: %s\n", s.status().to_string().c_str());
    std::exit(1);
  }
  g_server = std::move(*s).release();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bitnet::server::http_fuzz_one(*g_server, data, size);
  return 0;
}
