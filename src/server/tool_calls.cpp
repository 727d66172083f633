#include "server/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

namespace bitnet::server {

namespace {

using ojson = nlohmann::ordered_json;  // arguments keep the order the model wrote them in

constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim(std::string_view s) {
  const size_t a = s.find_first_not_of(kSpace);
  if (a == std::string_view::npos) return {};
  return s.substr(a, s.find_last_not_of(kSpace) - a + 1);
}

// The end (one past its closing bracket) of the JSON value opening at s[0], by brackets outside
// strings; npos when it does not close or nests deeper than kMaxToolCallDepth. Checked before
// nlohmann parses it, so no reply makes a deep value to walk.
size_t value_end(std::string_view s) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxToolCallDepth) return std::string_view::npos;
    } else if (c == '}' || c == ']') {
      if (--depth <= 0) return depth == 0 ? i + 1 : std::string_view::npos;
    }
  }
  return std::string_view::npos;
}

// A JSON object's text (whitespace around it allowed), parsed; nothing when it is not one.
std::optional<ojson> parse_object(std::string_view text) {
  const std::string_view t = trim(text);
  if (t.empty() || t[0] != '{' || value_end(t) != t.size()) return std::nullopt;
  ojson j = ojson::parse(t, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// {"name": ..., "arguments" | "parameters": {...} or a string holding one}, naming an offered
// function; other keys (Llama 3.2 adds "type") are ignored.
std::optional<ToolCall> read_call(std::string_view text, std::span<const std::string> tool_names) {
  const std::optional<ojson> j = parse_object(text);
  if (!j) return std::nullopt;
  const auto name = j->find("name");
  if (name == j->end() || !name->is_string()) return std::nullopt;
  const std::string& n = name->get_ref<const std::string&>();
  if (std::find(tool_names.begin(), tool_names.end(), n) == tool_names.end()) return std::nullopt;
  auto args = j->find("arguments");
  if (args == j->end()) args = j->find("parameters");
  ToolCall call{n, "{}"};
  if (args == j->end() || args->is_null()) return call;
  if (args->is_string()) {
    const std::optional<ojson> inner = parse_object(args->get_ref<const std::string&>());
    if (!inner) return std::nullopt;
    call.arguments = inner->dump(-1, ' ', false, ojson::error_handler_t::replace);
    return call;
  }
  if (!args->is_object()) return std::nullopt;
  call.arguments = args->dump(-1, ' ', false, ojson::error_handler_t::replace);
  return call;
}

// Hermes: <tool_call>...</tool_call> blocks; one that is not a valid call stays in the content.
ParsedReply parse_hermes(std::string_view text, std::span<const std::string> tool_names) {
  ParsedReply out;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find(kOpen, pos);
    if (open == std::string_view::npos) {
      out.content += text.substr(pos);
      break;
    }
    out.content += text.substr(pos, open - pos);
    const size_t close = text.find(kClose, open + kOpen.size());
    if (close == std::string_view::npos) {  // unfinished (cut by max_tokens): text
      out.content += text.substr(open);
      break;
    }
    std::optional<ToolCall> call = read_call(text.substr(open + kOpen.size(), close - open - kOpen.size()), tool_names);
    if (call) {
      out.calls.push_back(std::move(*call));
    } else {
      out.content += text.substr(open, close + kClose.size() - open);
    }
    pos = close + kClose.size();
  }
  return out;
}

// Llama 3.x: the whole reply is calls, or none of it is.
std::vector<ToolCall> parse_llama(std::string_view text, std::span<const std::string> tool_names) {
  std::string_view t = trim(text);
  if (t.starts_with(kPythonTag)) t = trim(t.substr(kPythonTag.size()));
  std::vector<ToolCall> calls;
  while (!t.empty()) {
    if (t[0] != '{') return {};
    const size_t end = value_end(t);
    if (end == std::string_view::npos) return {};
    std::optional<ToolCall> call = read_call(t.substr(0, end), tool_names);
    if (!call) return {};
    calls.push_back(std::move(*call));
    t.remove_prefix(end);
    const size_t next = t.find_first_not_of(" \t\r\n;");
    t = next == std::string_view::npos ? std::string_view() : t.substr(next);
  }
  return calls;
}

// Whether a reply that starts with `s` (its first non-space byte on) may be a tool call.
bool may_start_call(std::string_view s) {
  if (s.starts_with('{')) return true;
  for (const std::string_view marker : {kPythonTag, kOpen}) {
    if (s.starts_with(marker) || marker.starts_with(s)) return true;
  }
  return false;
}

}  // namespace

ParsedReply parse_tool_calls(std::string_view text, std::span<const std::string> tool_names) {
  if (text.find(kOpen) != std::string_view::npos) {
    ParsedReply hermes = parse_hermes(text, tool_names);
    if (!hermes.calls.empty()) return {std::string(trim(hermes.content)), std::move(hermes.calls)};
  }
  std::vector<ToolCall> calls = parse_llama(text, tool_names);
  if (calls.empty()) return {std::string(text), {}};
  return {"", std::move(calls)};
}

std::string ToolCallStream::push(std::string_view delta) {
  text_ += delta;
  const size_t first = text_.find_first_not_of(kSpace);
  if (sent_ == 0 && (first == std::string::npos || may_start_call(std::string_view(text_).substr(first)))) return {};
  size_t safe = text_.find(kOpen, sent_);
  if (safe == std::string::npos) {
    // A part of "<tool_call>" at the end is held until the next delta says what it is.
    safe = text_.size();
    for (size_t k = std::min(kOpen.size() - 1, text_.size() - sent_); k > 0; --k) {
      if (std::string_view(text_).ends_with(kOpen.substr(0, k))) {
        safe -= k;
        break;
      }
    }
  }
  std::string now = text_.substr(sent_, safe - sent_);
  sent_ = safe;
  return now;
}

nlohmann::json openai_tool_calls(std::span<const ToolCall> calls, bool stream) {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::mt19937_64 rng(std::random_device{}());
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    std::string id = "call_";
    for (int k = 0; k < 24; ++k) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
    nlohmann::json call = {{"id", std::move(id)},
                           {"type", "function"},
                           {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (stream) call["index"] = i;
    out.push_back(std::move(call));
  }
  return out;
}

ParsedReply ToolCallStream::finish(std::span<const std::string> tool_names) const {
  return parse_tool_calls(std::string_view(text_).substr(sent_), tool_names);
}

}  // namespace bitnet::server
