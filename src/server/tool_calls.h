// Tool calls in a chat model's reply, read back into OpenAI's `tool_calls` (as llama.cpp's
// server and Ollama do) for the two formats of the templates bitnet knows:
//   Llama 3.x   the whole reply is a JSON object {"name": ..., "parameters": {...}} ("arguments"
//               also taken), optionally after <|python_tag|>; several may follow one another,
//               separated by whitespace or ';'
//   Hermes      ChatML models (Qwen2.5, Hermes): <tool_call>{"name": ..., "arguments": {...}}
//               </tool_call> blocks anywhere in the reply, any number; the text around them is
//               the message's content
// The reply is untrusted input: anything that does not parse, nests deeper than kMaxDepth,
// or names a function the request did not offer stays text. Pure functions: the fuzz target
// (fuzz_entry.cpp) and the tests call them directly.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bitnet::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text (OpenAI's `function.arguments` is a string)
};

struct ParsedReply {
  std::string content;          // the text outside the calls (all of it when there are none)
  std::vector<ToolCall> calls;  // in the order written
};

inline constexpr int kMaxToolCallDepth = 32;  // nesting of a call's JSON

// The finished reply, split into content and the calls to functions named in `tool_names`.
// No calls: `content` is `text` unchanged. Calls: `content` is the rest, trimmed.
ParsedReply parse_tool_calls(std::string_view text, std::span<const std::string> tool_names);

// OpenAI's `message.tool_calls` (stream: `delta.tool_calls`, each with its `index`):
// [{"id": "call_" + 24 random letters and digits, "type": "function", "function": {"name",
// "arguments"}}].
nlohmann::json openai_tool_calls(std::span<const ToolCall> calls, bool stream);

// Streaming with tools: the content that can be sent while the reply grows. What may be a
// tool call is held back: the whole reply while it starts like one (only whitespace so far,
// '{', <|python_tag|>, <tool_call>, or a part of those), else from a <tool_call> (or a part
// of one at the end) on. finish() parses what was held.
class ToolCallStream {
 public:
  // The reply grew by `delta`: the text to send as content now (may be empty).
  std::string push(std::string_view delta);
  // The reply is finished: what was held back, parsed. `content` is still to be sent.
  ParsedReply finish(std::span<const std::string> tool_names) const;

 private:
  std::string text_;  // the reply so far
  size_t sent_ = 0;   // its first sent_ bytes were sent as content
};

}  // namespace bitnet::server
