// The body of the HTTP fuzz target (tests/fuzz/fuzz_server.cpp, libFuzzer) and of the test that
// runs it under plain ctest (http_fuzz_test.cpp): raw bytes of one connection in, the server's
// raw response out, through every route, header parser and error handler, without a socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "bitnet/model.h"
#include "bitnet/status.h"
#include "server/http_server.h"

namespace bitnet::server {

// A server over the given model (CPU, one thread, a 128-token paged context, at most 4 new
// tokens a request, the built-in Llama 3 template, tools included), not bound to any port.
struct FuzzServer {
  std::unique_ptr<Model> model;
  std::unique_ptr<HttpServer> http;
  static Result<std::unique_ptr<FuzzServer>> create(const std::string& model_path);
};

// Sends `data` as one connection's bytes and checks the answer: nothing, or HTTP/1.1 responses
// (after a "100 Continue" when the request expects one) whose status is never 500, a JSON body
// (unless compressed: "Accept-Encoding: gzip" is honoured) that parses, a JSON error body wherever one is declared. Returns the first
// response's status (0: none). Aborts (BITNET_CHECK) on a broken invariant.
int http_fuzz_one(FuzzServer& server, const uint8_t* data, size_t size);

}  // namespace bitnet::server
