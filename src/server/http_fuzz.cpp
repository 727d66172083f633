#include "server/http_fuzz.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/chat.h"
#include "core/check.h"

namespace bitnet::server {

namespace {

// The body of a chunked HTTP/1.1 message (hex size line, data, CRLF, ..., a last chunk of 0),
// or nothing when it is malformed or cut short.
std::optional<std::string> dechunk(std::string_view in) {
  std::string body;
  for (;;) {
    const size_t eol = in.find("\r\n");
    if (eol == std::string_view::npos || eol == 0 || eol > 16) return std::nullopt;
    size_t n = 0;
    for (const char c : in.substr(0, eol)) {
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return std::nullopt;
      n = n * 16 + static_cast<size_t>(d);
    }
    in.remove_prefix(eol + 2);
    if (n == 0) return body;
    if (in.size() < n + 2 || in.substr(n, 2) != "\r\n") return std::nullopt;
    body.append(in.substr(0, n));
    in.remove_prefix(n + 2);
  }
}

}  // namespace

Result<std::unique_ptr<FuzzServer>> FuzzServer::create(const std::string& model_path) {
  auto s = std::make_unique<FuzzServer>();
  EngineOptions e;
  e.model_path = model_path;
  e.device = "cpu";
  e.n_ctx = 128;
  e.n_threads = 1;
  e.kv_block = 16;
  BITNET_ASSIGN_OR_RETURN(s->model, Model::load(e));
  ServerOptions o;
  o.limits.max_tokens = 4;
  o.limits.max_prompt_chars = 4096;
  s->http = std::make_unique<HttpServer>(o);
  BITNET_ASSIGN_OR_RETURN(chat::ChatTemplate tmpl, chat::ChatTemplate::builtin("llama3"));
  ChatRenderer chat;
  chat.takes_tools = tmpl.uses_tools();
  chat.render = [tmpl = std::move(tmpl)](const std::vector<ChatMessage>& m, const std::string& tools_json) {
    std::vector<chat::Message> messages;
    for (const ChatMessage& msg : m) messages.push_back({msg.role, msg.content, msg.tool_calls_json, msg.tool_call_id});
    return tmpl.render(messages, {true, "<s>", "</s>", tools_json});
  };
  s->http->set_model(*s->model, std::move(chat));
  return s;
}

int http_fuzz_one(FuzzServer& server, const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string out = server.http->handle_raw(in);
  // "Expect: 100-continue" gets the interim answer first (found by fuzz_server: a valid 1xx).
  const std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  if (out.rfind(kContinue, 0) == 0) out.erase(0, kContinue.size());
  if (out.empty()) return 0;
  BITNET_CHECK(out.rfind("HTTP/1.1 ", 0) == 0 && out.size() >= 12);
  const int status = std::stoi(out.substr(9, 3));
  BITNET_CHECK(status >= 200 && status < 600 && status != 500);
  // A whole (not chunked) JSON body of the first response must parse; errors must be OpenAI's.
  const size_t head_end = out.find("\r\n\r\n");
  BITNET_CHECK(head_end != std::string::npos);
  const std::string_view head(out.data(), head_end);
  const size_t length_at = head.find("Content-Length: ");
  const bool has_body = in.rfind("HEAD", 0) != 0 &&  // a HEAD answer declares a length it does not send
                        head.find("Content-Encoding: ") == std::string_view::npos;  // gzip when asked
  const bool json_body = has_body && head.find("Content-Type: application/json") != std::string_view::npos;
  if (json_body && length_at != std::string_view::npos) {
    const size_t n = std::stoul(std::string(head.substr(length_at + 16, 12)));
    BITNET_CHECK(head_end + 4 + n <= out.size());
    const auto j = nlohmann::json::parse(out.substr(head_end + 4, n), nullptr, false);
    BITNET_CHECK(!j.is_discarded());
    if (status >= 400) BITNET_CHECK(j.contains("error") && j["error"]["code"] == status);
  } else if (json_body && head.find("Transfer-Encoding: chunked") != std::string_view::npos) {
    // A completion (written while it runs, whitespace first): whole, and JSON.
    const std::optional<std::string> body = dechunk(std::string_view(out).substr(head_end + 4));
    BITNET_CHECK(body.has_value());
    const auto j = nlohmann::json::parse(*body, nullptr, false);
    BITNET_CHECK(!j.is_discarded() && j.is_object());
  }
  return status;
}

}  // namespace bitnet::server
