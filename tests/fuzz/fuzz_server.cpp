// libFuzzer target over the server's request handling: raw bytes of one connection in, the
// response out, no socket (src/server/http_fuzz.cpp), over the repo's trained model.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/http_fuzz.h"

namespace {
bitnet::server::FuzzServer* g_server = nullptr;  // one per process: loading the model per input would dominate
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto s = bitnet::server::FuzzServer::create(BITNET_SOURCE_DIR "/models/tiny-stories-b158.gguf");
  if (!s.ok()) {
    std::fprintf(stderr, "fuzz_server: %s\n", s.status().to_string().c_str());
    std::exit(1);
  }
  g_server = std::move(*s).release();
  // One completion first, so that the statics the engine creates lazily exist before the
  // handler below is registered: exit() then stops the scheduler's thread before it destroys
  // them (found by fuzz_server: the thread still stepping while fp16_table() was freed at exit).
  const std::string body = R"({"prompt":"a","max_tokens":2})";
  const std::string warm = "POST /v1/completions HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (bitnet::server::http_fuzz_one(*g_server, reinterpret_cast<const uint8_t*>(warm.data()), warm.size()) != 200) {
    std::fprintf(stderr, "fuzz_server: the warm-up completion failed\n");
    std::exit(1);
  }
  std::atexit([] { delete g_server; });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bitnet::server::http_fuzz_one(*g_server, data, size);
  return 0;
}
