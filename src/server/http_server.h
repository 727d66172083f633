// `bitnet serve`: an OpenAI-compatible HTTP server on cpp-httplib. Endpoints:
//   POST /v1/completions, POST /v1/chat/completions (stream: server-sent events ending with
//   "data: [DONE]"), GET /v1/models, GET /health (503 while the model loads), POST /tokenize,
//   POST /detokenize, GET /metrics (Prometheus text), GET /openapi.json (openapi.json here).
// Errors use OpenAI's JSON shape. Binds 127.0.0.1 unless told otherwise; --api-key is compared
// in constant time; bodies, fields and timeouts are bounded; CORS is off unless an origin is
// given. A client that goes away stops its generation at the next step.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/model.h"
#include "bitnet/status.h"
#include "server/request.h"

namespace bitnet::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (see HttpServer::port)
  std::string api_key;             // "": no authentication
  std::string cors_origin;         // "": no CORS headers
  size_t max_queue = 16;           // requests waiting beyond the running ones; more get 503
  size_t parallel = 4;             // requests decoded together in each step (continuous batching)
  int64_t step_tokens = 512;       // tokens per step: decode tokens first, then prompt chunks
  size_t max_body_bytes = 4 << 20;
  int read_timeout_s = 30;
  int write_timeout_s = 30;
  int threads = 8;                 // HTTP worker threads (connections served at once)
  std::string model_id = "bitnet"; // GET /v1/models, echoed in responses
  RequestLimits limits;
};

// Renders chat messages into the prompt text for the model (chat template): the messages and
// the request's tools (GenerationRequest::tools_json, "" = none).
struct ChatRenderer {
  std::function<Result<std::string>(const std::vector<ChatMessage>&, const std::string& tools_json)> render;
  // The template reads `tools`; when it does not, a request with tools is refused (400)
  // instead of having them silently dropped.
  bool takes_tools = false;
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket (GET /health answers 503 until set_model). Returns the bound port.
  Result<int> bind();
  // Serves until stop(); call after bind(), typically on its own thread.
  void run();
  void stop();
  // The model is loaded: generation endpoints open, each request in a Session of `model`,
  // which needs a paged KV cache (EngineOptions::kv_block > 0) and must outlive the server.
  // `chat.render` may be empty (chat endpoint: 400).
  void set_model(Model& model, ChatRenderer chat);
  // One connection's raw request bytes in, the raw response bytes out, without a socket (the
  // fuzz target tests/fuzz/fuzz_server.cpp and http_fuzz_test.cpp); needs no bind().
  std::string handle_raw(std::string_view request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bitnet::server
