#include "server/fuzz_entry.h"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/check.h"
#include "server/request.h"
#include "server/tool_calls.h"

namespace bitnet::server {

void request_fuzz_one(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const RequestLimits limits;
  for (bool chat : {false, true}) {
    const ParseResult r = parse_generation_request(body, chat, limits);
    if (r.request) {
      const GenerationRequest& g = *r.request;
      BITNET_CHECK(g.chat == chat);
      BITNET_CHECK(g.max_tokens >= 0 && g.max_tokens <= limits.max_tokens);
      BITNET_CHECK(g.sampling.temperature >= 0.0f && g.sampling.temperature <= 2.0f);
      BITNET_CHECK(g.sampling.top_p >= 0.0f && g.sampling.top_p <= 1.0f);
      BITNET_CHECK(g.sampling.min_p >= 0.0f && g.sampling.min_p <= 1.0f);
      BITNET_CHECK(g.sampling.top_k >= 0);
      BITNET_CHECK(static_cast<int64_t>(g.stop.size()) <= limits.max_stop);
      for (const std::string& s : g.stop) BITNET_CHECK(!s.empty() && static_cast<int64_t>(s.size()) <= limits.max_stop_chars);
      BITNET_CHECK(!chat || (!g.messages.empty() && static_cast<int64_t>(g.messages.size()) <= limits.max_messages));
    } else {
      BITNET_CHECK(r.error.status == 400 || r.error.status == 413);
      BITNET_CHECK(!r.error.message.empty());
      const auto j = nlohmann::json::parse(error_json(r.error), nullptr, false);
      BITNET_CHECK(j.is_object() && j["error"]["message"].is_string() && j["error"]["code"] == r.error.status);
    }
  }

  // The same bytes as a chat model's reply to a request with tools: calls only to offered
  // functions, with object arguments; no calls leaves the text as it was.
  const std::string names[] = {"get_weather", "f"};
  const ParsedReply reply = parse_tool_calls(body, names);
  if (reply.calls.empty()) BITNET_CHECK(reply.content == body);
  for (const ToolCall& c : reply.calls) {
    BITNET_CHECK(c.name == names[0] || c.name == names[1]);
    BITNET_CHECK(nlohmann::json::parse(c.arguments, nullptr, false).is_object());
  }
  // Streamed in pieces: what was sent is the reply's start, and the held rest gives the same calls.
  ToolCallStream stream;
  std::string sent;
  const size_t piece = 1 + size % 7;
  for (size_t at = 0; at < body.size(); at += piece) sent += stream.push(body.substr(at, piece));
  const ParsedReply rest = stream.finish(names);
  BITNET_CHECK(body.starts_with(sent));
  BITNET_CHECK(rest.calls.size() == reply.calls.size());
  for (size_t i = 0; i < rest.calls.size(); ++i) BITNET_CHECK(rest.calls[i].name == reply.calls[i].name);
  if (rest.calls.empty()) BITNET_CHECK(sent + rest.content == body);
}

}  // namespace bitnet::server
