#include "server/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace bitnet::server {

namespace {

using json = nlohmann::json;

ApiError bad(std::string param, std::string message) {
  return {400, "invalid_request_error", std::move(param), std::move(message)};
}

constexpr int kMaxJsonDepth = 64;  // no request needs more; dump() and the templates recurse

// JSON text parsed (nlohmann's parser does not recurse); discarded when it is not JSON or
// nests deeper than kMaxJsonDepth (`too_deep` says which).
template <typename Json>
Json parse_bounded(std::string_view text, bool& too_deep) {
  too_deep = false;
  Json j = Json::parse(
      text,
      [&too_deep](int depth, typename Json::parse_event_t, Json&) {
        if (depth > kMaxJsonDepth) too_deep = true;
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep) j = Json(Json::value_t::discarded);
  return j;
}

// Field readers: absent (or null) leaves `out` as is; a value of the wrong type or outside
// [lo, hi] is an error naming the field.
std::optional<ApiError> read_number(const json& j, const char* key, double lo, double hi, double& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return bad(key, fmt::format("'{}' must be a number", key));
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) return bad(key, fmt::format("'{}' must be within [{}, {}]", key, lo, hi));
  out = v;
  return std::nullopt;
}

std::optional<ApiError> read_int(const json& j, const char* key, int64_t lo, int64_t hi, int64_t& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() && !it->is_number_unsigned()) return bad(key, fmt::format("'{}' must be an integer", key));
  if (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(hi) : (it->get<int64_t>() < lo || it->get<int64_t>() > hi)) {
    return bad(key, fmt::format("'{}' must be within [{}, {}]", key, lo, hi));
  }
  out = it->get<int64_t>();
  return std::nullopt;
}

std::optional<ApiError> read_bool(const json& j, const char* key, bool& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return bad(key, fmt::format("'{}' must be true or false", key));
  out = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_sampling(const json& j, GenerationRequest& r) {
  SamplingParams& s = r.sampling;
  double temperature = s.temperature, top_p = s.top_p, min_p = s.min_p, repeat_penalty = s.repeat_penalty;
  int64_t top_k = s.top_k, seed = 0;
  if (auto e = read_number(j, "temperature", 0.0, 2.0, temperature)) return e;
  if (auto e = read_number(j, "top_p", 0.0, 1.0, top_p)) return e;
  if (auto e = read_number(j, "min_p", 0.0, 1.0, min_p)) return e;
  if (auto e = read_number(j, "repeat_penalty", 0.0, 10.0, repeat_penalty)) return e;
  if (auto e = read_int(j, "top_k", 0, 1 << 20, top_k)) return e;
  const auto seed_it = j.find("seed");
  if (seed_it != j.end() && !seed_it->is_null()) {
    if (seed_it->is_number_unsigned()) {
      s.seed = seed_it->get<uint64_t>();
    } else if (auto e = read_int(j, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), seed)) {
      return e;
    } else {
      s.seed = static_cast<uint64_t>(seed);
    }
    r.seed_given = true;
  }
  s.temperature = static_cast<float>(temperature);
  s.top_p = static_cast<float>(top_p);
  s.min_p = static_cast<float>(min_p);
  s.repeat_penalty = static_cast<float>(repeat_penalty);
  s.top_k = static_cast<int32_t>(top_k);
  return std::nullopt;
}

std::optional<ApiError> read_stop(const json& j, const RequestLimits& lim, std::vector<std::string>& out) {
  const auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return std::nullopt;
  std::vector<json> items;
  if (it->is_string()) {
    items.push_back(*it);
  } else if (it->is_array()) {
    items.assign(it->begin(), it->end());
  } else {
    return bad("stop", "'stop' must be a string or an array of strings");
  }
  if (static_cast<int64_t>(items.size()) > lim.max_stop) return bad("stop", fmt::format("at most {} stop strings", lim.max_stop));
  for (const json& s : items) {
    if (!s.is_string()) return bad("stop", "'stop' must be a string or an array of strings");
    const auto& str = s.get_ref<const std::string&>();
    if (str.empty() || static_cast<int64_t>(str.size()) > lim.max_stop_chars) {
      return bad("stop", fmt::format("stop strings must hold 1 to {} bytes", lim.max_stop_chars));
    }
    out.push_back(str);
  }
  return std::nullopt;
}

// Message content: a string, or OpenAI's array of parts of which only text parts are taken.
std::optional<ApiError> read_content(const json& m, std::string& out) {
  const auto it = m.find("content");
  if (it == m.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    out = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) return bad("messages", "message content must be a string or an array of text parts");
  for (const json& part : *it) {
    const bool text_part = part.is_object() && part.contains("type") && part["type"].is_string() &&
                           part["type"].get_ref<const std::string&>() == "text" && part.contains("text") &&
                           part["text"].is_string();
    if (!text_part) {
      return bad("messages", "only text content parts are supported");
    }
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

// OpenAI's tools: [{"type": "function", "function": {"name", "description"?, "parameters"?,
// "strict"?}}], and tool_choice: "none" | "auto" | "required" | {"type": "function",
// "function": {"name"}}. Only "none" and "auto" can be honoured: nothing here forces the model
// to call a tool, so "required" and a named function are refused rather than ignored.
std::optional<ApiError> read_tools(std::string_view body, const json& j, GenerationRequest& r) {
  const auto it = j.find("tools");
  const bool has_tools = it != j.end() && !it->is_null();
  if (has_tools) {
    if (!it->is_array()) return bad("tools", "'tools' must be an array of tool objects");
    if (it->size() > 128) return bad("tools", "at most 128 tools");
    for (const json& t : *it) {
      const bool function_type = t.is_object() && t.contains("type") && t["type"].is_string() &&
                                 t["type"].get_ref<const std::string&>() == "function";
      if (!function_type) return bad("tools", "each tool must be an object with \"type\": \"function\"");
      const auto f = t.find("function");
      if (f == t.end() || !f->is_object()) return bad("tools", "each tool needs a 'function' object");
      const auto name = f->find("name");
      if (name == f->end() || !name->is_string()) return bad("tools", "each function needs a string 'name'");
      const std::string& n = name->get_ref<const std::string&>();
      const bool name_ok = !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      });
      if (!name_ok) return bad("tools", "function names are 1 to 64 characters of a-z, A-Z, 0-9, _ and -");
      if (const auto d = f->find("description"); d != f->end() && !d->is_null() && !d->is_string()) {
        return bad("tools", "a function's 'description' must be a string");
      }
      if (const auto p = f->find("parameters"); p != f->end() && !p->is_null() && !p->is_object()) {
        return bad("tools", "a function's 'parameters' must be a JSON Schema object");
      }
      if (const auto st = f->find("strict"); st != f->end() && !st->is_null() && !st->is_boolean()) {
        return bad("tools", "a function's 'strict' must be true or false");
      }
    }
  }
  std::string choice = "auto";
  if (const auto c = j.find("tool_choice"); c != j.end() && !c->is_null()) {
    if (!has_tools) return bad("tool_choice", "'tool_choice' is only allowed when 'tools' are given");
    if (c->is_string()) {
      choice = c->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required") {
        return bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a function object");
      }
    } else if (c->is_object() && c->contains("function") && (*c)["function"].is_object() &&
               (*c)["function"].contains("name") && (*c)["function"]["name"].is_string()) {
      choice = "function";
    } else {
      return bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a function object");
    }
    if (choice == "required" || choice == "function") {
      return bad("tool_choice", "this server cannot force a tool call; use \"auto\" or \"none\"");
    }
  }
  if (const auto p = j.find("parallel_tool_calls"); p != j.end() && !p->is_null() && !p->is_boolean()) {
    return bad("parallel_tool_calls", "'parallel_tool_calls' must be true or false");
  }
  if (!has_tools || choice == "none") return std::nullopt;
  for (const json& t : *it) r.tool_names.push_back(t["function"]["name"].get<std::string>());
  // Again with the keys in the order sent: templates print the tools (tojson) as given.
  const auto ordered = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  const auto tools = ordered.is_object() ? ordered.find("tools") : ordered.end();
  if (tools == ordered.end() || !tools->is_array() || tools->size() != it->size()) return bad("tools", "'tools' could not be read");
  r.tools_json = tools->dump(-1, ' ', false, json::error_handler_t::replace);
  return std::nullopt;
}

// An assistant message's tool_calls, [{"id"?, "type"?: "function", "function": {"name",
// "arguments"?}}] with `arguments` OpenAI's JSON string (an object also taken), as the array
// the chat template reads: each `arguments` that holds a JSON object becomes that object (keys
// in the order sent), as Hugging Face's templates expect (`arguments | tojson`).
std::optional<ApiError> read_tool_calls(const json& m, ChatMessage& msg) {
  const auto it = m.find("tool_calls");
  if (it == m.end() || it->is_null()) return std::nullopt;
  if (msg.role != "assistant") return bad("messages", "only assistant messages carry 'tool_calls'");
  if (!it->is_array() || it->size() > 128) return bad("messages", "'tool_calls' must be an array of at most 128 calls");
  if (it->empty()) return std::nullopt;
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (const json& c : *it) {
    const char* const kShape = "each tool call must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}";
    if (!c.is_object()) return bad("messages", kShape);
    const auto type = c.find("type");
    if (type != c.end() && !(type->is_string() && type->get_ref<const std::string&>() == "function")) return bad("messages", kShape);
    const auto id = c.find("id");
    if (id != c.end() && !id->is_null() && !id->is_string()) return bad("messages", kShape);
    const auto f = c.find("function");
    if (f == c.end() || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) return bad("messages", kShape);
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
    if (const auto a = f->find("arguments"); a != f->end() && !a->is_null()) {
      if (a->is_string()) {
        bool too_deep = false;
        auto parsed = parse_bounded<nlohmann::ordered_json>(a->get_ref<const std::string&>(), too_deep);
        if (too_deep) return bad("messages", "a tool call's 'arguments' nest too deeply");
        arguments = parsed.is_object() ? std::move(parsed) : nlohmann::ordered_json(a->get<std::string>());
      } else if (a->is_object()) {
        bool too_deep = false;
        arguments = parse_bounded<nlohmann::ordered_json>(a->dump(), too_deep);
      } else {
        return bad("messages", "a tool call's 'arguments' must be a string (JSON) or an object");
      }
    }
    calls.push_back({{"id", id != c.end() && id->is_string() ? id->get<std::string>() : std::string()},
                     {"type", "function"},
                     {"function", {{"name", (*f)["name"].get<std::string>()}, {"arguments", std::move(arguments)}}}});
  }
  msg.tool_calls_json = calls.dump(-1, ' ', false, json::error_handler_t::replace);
  return std::nullopt;
}

}  // namespace

ParseResult parse_generation_request(std::string_view body, bool chat, const RequestLimits& lim) {
  ParseResult out;
  bool too_deep = false;
  const json j = parse_bounded<json>(body, too_deep);
  if (j.is_discarded()) {
    out.error = bad("", too_deep ? fmt::format("the request body nests deeper than {} levels", kMaxJsonDepth)
                                 : "the request body is not valid JSON");
    return out;
  }
  if (!j.is_object()) {
    out.error = bad("", "the request body must be a JSON object");
    return out;
  }
  GenerationRequest r;
  r.chat = chat;
  if (const auto it = j.find("model"); it != j.end() && it->is_string()) r.model = it->get<std::string>();
  int64_t total_chars = 0;
  if (chat) {
    const auto it = j.find("messages");
    if (it == j.end() || !it->is_array() || it->empty()) {
      out.error = bad("messages", "'messages' must be a non-empty array");
      return out;
    }
    if (static_cast<int64_t>(it->size()) > lim.max_messages) {
      out.error = bad("messages", fmt::format("at most {} messages", lim.max_messages));
      return out;
    }
    for (const json& m : *it) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        out.error = bad("messages", "each message must be an object with a string 'role'");
        return out;
      }
      ChatMessage msg{m["role"].get<std::string>(), {}};
      if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "developer" &&
          msg.role != "tool") {
        out.error = bad("messages", fmt::format("unknown role '{}'", msg.role.substr(0, 32)));
        return out;
      }
      if (auto e = read_content(m, msg.content)) {
        out.error = *e;
        return out;
      }
      if (auto e = read_tool_calls(m, msg)) {
        out.error = *e;
        return out;
      }
      if (const auto id = m.find("tool_call_id"); id != m.end() && !id->is_null()) {
        if (!id->is_string()) {
          out.error = bad("messages", "'tool_call_id' must be a string");
          return out;
        }
        msg.tool_call_id = id->get<std::string>();
      }
      total_chars += static_cast<int64_t>(msg.content.size() + msg.tool_calls_json.size() + msg.tool_call_id.size());
      r.messages.push_back(std::move(msg));
    }
  } else {
    const auto it = j.find("prompt");
    if (it == j.end() || !(it->is_string() || (it->is_array() && it->size() == 1 && (*it)[0].is_string()))) {
      out.error = bad("prompt", "'prompt' must be a string (or an array of one string)");
      return out;
    }
    r.prompt = it->is_string() ? it->get<std::string>() : (*it)[0].get<std::string>();
    total_chars = static_cast<int64_t>(r.prompt.size());
  }
  if (total_chars > lim.max_prompt_chars) {
    out.error = {413, "invalid_request_error", chat ? "messages" : "prompt",
                 fmt::format("the prompt holds {} bytes; the limit is {}", total_chars, lim.max_prompt_chars)};
    return out;
  }
  // max_tokens, or max_completion_tokens (newer chat API), or llama.cpp's n_predict.
  for (const char* key : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    if (auto e = read_int(j, key, 1, lim.max_tokens, r.max_tokens)) {
      out.error = *e;
      return out;
    }
  }
  if (auto e = read_sampling(j, r)) {
    out.error = *e;
    return out;
  }
  if (auto e = read_stop(j, lim, r.stop)) {
    out.error = *e;
    return out;
  }
  if (auto e = read_bool(j, "stream", r.stream)) {
    out.error = *e;
    return out;
  }
  if (const auto it = j.find("stream_options"); it != j.end() && it->is_object()) {
    if (auto e = read_bool(*it, "include_usage", r.include_usage)) {
      out.error = *e;
      return out;
    }
  }
  if (chat) {
    if (auto e = read_tools(body, j, r)) {
      out.error = *e;
      return out;
    }
  } else if (j.contains("tools") || j.contains("tool_choice")) {
    out.error = bad(j.contains("tools") ? "tools" : "tool_choice", "tools are a chat completions parameter");
    return out;
  }
  int64_t n = 1;
  if (auto e = read_int(j, "n", 1, 1, n)) {
    out.error = bad("n", "only n = 1 is supported");
    return out;
  }
  out.request = std::move(r);
  return out;
}

std::string error_json(const ApiError& e) {
  json j = {{"error", {{"message", e.message}, {"type", e.type}, {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                       {"code", e.status}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace bitnet::server
