// OpenAI-style request bodies, parsed and bounded before anything runs: every field is checked
// for type and range, and a bad one becomes an ApiError (HTTP status, OpenAI error type, the
// parameter, a message) instead of an exception or a crash. Pure functions: the fuzz target
// and the tests call them without a socket.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/sampling.h"

namespace bitnet::server {

// Bounds on what one request may ask for.
struct RequestLimits {
  int64_t max_tokens = 4096;         // max_tokens / n_predict ceiling (also the default cap)
  int64_t max_prompt_chars = 1 << 20;
  int64_t max_messages = 256;
  int64_t max_stop = 4;              // stop strings (OpenAI: up to 4)
  int64_t max_stop_chars = 256;
};

struct ApiError {
  int status = 400;                         // HTTP status
  std::string type = "invalid_request_error";
  std::string param;                        // the offending field ("" when none)
  std::string message;
};

struct ChatMessage {
  std::string role;
  std::string content;
  // An assistant turn's `tool_calls` for the chat template (chat::Message::tool_calls_json: the
  // arguments string of each parsed into an object when it holds one); "" = none.
  std::string tool_calls_json{};
  std::string tool_call_id{};  // a tool turn's `tool_call_id` ("" = none)
};

// One completion request: a prompt (completions) or messages (chat completions).
struct GenerationRequest {
  bool chat = false;
  std::string prompt;                 // completions
  std::vector<ChatMessage> messages;  // chat completions
  int64_t max_tokens = 0;             // 0: up to the limit
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  std::string model;                  // echoed back
  // Chat completions: OpenAI's `tools` (function definitions, checked against its schema) as a
  // JSON array, keys in the order sent, for the chat template; "" when none were sent or
  // `tool_choice` is "none". With tools, the reply is read back for calls to them
  // (tool_calls.h) and answered as OpenAI's `tool_calls`.
  std::string tools_json;
  std::vector<std::string> tool_names;  // the functions in tools_json (empty when it is "")
};

// A JSON body -> request, or the error to answer with. `chat` picks the endpoint's schema.
struct ParseResult {
  std::optional<GenerationRequest> request;
  ApiError error;
};
ParseResult parse_generation_request(std::string_view body, bool chat, const RequestLimits& limits);

// The OpenAI error object: {"error": {"message", "type", "param", "code"}}.
std::string error_json(const ApiError& e);

}  // namespace bitnet::server
