#include "server/fuzz_entry.h"

#include <nlohmann/json.hpp>
#include <string_view>

#include "core/check.h"
#include "server/request.h"

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
}

}  // namespace bitnet::server
