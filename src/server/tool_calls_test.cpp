// Tool calls read back from a model's reply (tool_calls.h): the Llama 3.x and Hermes formats,
// replies that only look like calls, hostile ones, and the streaming hold-back.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace bitnet::server {
namespace {

const std::vector<std::string> kNames = {"get_weather", "noop"};

ParsedReply parse(std::string_view text) { return parse_tool_calls(text, kNames); }

// What a reply streamed in pieces of `piece` bytes sends as content, and what is held and parsed.
std::pair<std::string, ParsedReply> stream(std::string_view text, size_t piece) {
  ToolCallStream s;
  std::string sent;
  for (size_t at = 0; at < text.size(); at += piece) sent += s.push(text.substr(at, piece));
  return {sent, s.finish(kNames)};
}

TEST(ToolCalls, Llama3JsonWithParametersOrArguments) {
  for (const char* text : {R"({"name": "get_weather", "parameters": {"city": "Paris", "days": 2}})",
                           R"(  <|python_tag|>{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}  )",
                           R"({"type": "function", "name": "get_weather", "parameters": "{\"city\": \"Paris\", \"days\": 2}"})"}) {
    const ParsedReply r = parse(text);
    ASSERT_EQ(r.calls.size(), 1u) << text;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","days":2})") << text;  // keys in the order written
    EXPECT_EQ(r.content, "");
  }
  // Several, separated by ';' or whitespace; no arguments is {}.
  const ParsedReply two = parse(R"({"name": "noop"}; {"name": "get_weather", "parameters": {"z": 1, "a": [1, "}"]}})");
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[0].arguments, "{}");
  EXPECT_EQ(two.calls[1].arguments, R"({"z":1,"a":[1,"}"]})");
}

TEST(ToolCalls, HermesBlocksWithTextAround) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\\u00fcrich\"}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"noop\", \"arguments\": {}}</tool_call>\n";
  const ParsedReply r = parse(text);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, "{\"city\":\"Z\xc3\xbcrich\"}");
  EXPECT_EQ(r.calls[1].name, "noop");
  EXPECT_EQ(r.content, "Let me check.");
  // A block naming an unknown function, or not a call at all, stays in the content.
  const ParsedReply mixed = parse(
      "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call><tool_call>oops</tool_call>"
      "<tool_call>{\"name\": \"noop\"}</tool_call>");
  ASSERT_EQ(mixed.calls.size(), 1u);
  EXPECT_EQ(mixed.content, "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call><tool_call>oops</tool_call>");
}

TEST(ToolCalls, TextThatIsNotACallStaysTextUnchanged) {
  const char* const kNotCalls[] = {
      "",
      "   ",
      "The weather is fine.",
      R"(Sure: {"name": "get_weather", "parameters": {}})",            // text first (Llama: the whole reply)
      R"({"name": "get_weather", "parameters": {}} and more)",         // text after
      R"({"name": "delete_everything", "parameters": {}})",            // not offered
      R"({"name": "get_weather", "parameters": [1, 2]})",              // arguments not an object
      R"({"name": "get_weather", "parameters": "not json"})",          // a string that is not an object
      R"({"name": 5, "parameters": {}})",
      R"({"parameters": {}})",
      R"({"name": "get_weather", "parameters": {})",                   // unclosed
      R"({"name": "get_weather", "parameters": {}}})",                 // one brace too many
      R"({"name": "get_weather", "parameters": {"a": "\"}"})",         // the brace in the string does not close it
      R"({"name": "get_weather" "parameters": {}})",                   // not JSON
      "<tool_call>{\"name\": \"get_weather\"}",                        // unfinished block (cut by max_tokens)
      "<tool_call></tool_call>",
      "<tool_call><tool_call>{\"name\": \"noop\"}</tool_call>",        // the inner open tag is not JSON
      "{\"name\": \"get_weather\", \"parameters\": {\"a\": \"\xff\xfe\"}}",  // invalid UTF-8
      "<|python_tag|>",
      "<|python_tag|>print(1)",
  };
  for (const char* text : kNotCalls) {
    const ParsedReply r = parse(text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

TEST(ToolCalls, DeepNestingIsRefusedBeforeParsing) {
  const auto nested = [](int depth) {
    return std::string(R"({"name": "get_weather", "parameters": {"a": )") + std::string(depth, '[') + std::string(depth, ']') + "}}";
  };
  EXPECT_EQ(parse(nested(kMaxToolCallDepth - 2)).calls.size(), 1u);
  EXPECT_TRUE(parse(nested(kMaxToolCallDepth)).calls.empty());
  EXPECT_TRUE(parse(nested(100000)).calls.empty());  // no recursion over it anywhere
  const std::string deep_string_args = std::string(R"({"name": "noop", "arguments": ")") + std::string(50000, '[') + "\"}";
  EXPECT_TRUE(parse(deep_string_args).calls.empty());
  EXPECT_TRUE(parse(std::string(100000, '{')).calls.empty());
  EXPECT_TRUE(parse("<tool_call>" + std::string(100000, '{') + "</tool_call>").calls.empty());
}

TEST(ToolCalls, OpenAiShape) {
  const std::vector<ToolCall> calls = {{"get_weather", R"({"city":"Paris"})"}, {"noop", "{}"}};
  const nlohmann::json j = openai_tool_calls(calls, false);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["type"], "function");
  EXPECT_EQ(j[0]["function"]["name"], "get_weather");
  EXPECT_EQ(j[0]["function"]["arguments"], R"({"city":"Paris"})");  // a string, as OpenAI sends it
  EXPECT_FALSE(j[0].contains("index"));
  const std::string id = j[0]["id"];
  EXPECT_EQ(id.rfind("call_", 0), 0u);
  EXPECT_EQ(id.size(), 29u);
  EXPECT_NE(j[0]["id"], j[1]["id"]);
  const nlohmann::json delta = openai_tool_calls(calls, true);
  EXPECT_EQ(delta[1]["index"], 1);
}

TEST(ToolCallStream, PlainTextStreamsAsItComes) {
  ToolCallStream s;
  EXPECT_EQ(s.push(" "), "");  // only whitespace: may still open a call
  EXPECT_EQ(s.push("Hel"), " Hel");
  EXPECT_EQ(s.push("lo <"), "lo ");  // "<" may open <tool_call>
  EXPECT_EQ(s.push("b> and"), "<b> and");
  EXPECT_EQ(s.push(" <tool_"), " ");
  EXPECT_EQ(s.push("call>{\"name\": \"noop\"}</tool_call> bye"), "");  // held from the tag on
  const ParsedReply end = s.finish(kNames);
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.content, "bye");
}

TEST(ToolCallStream, AReplyThatStartsLikeACallIsHeldWhole) {
  for (const std::string& text : {std::string(R"(<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}})"),
                                 std::string("\n<tool_call>\n{\"name\": \"noop\"}\n</tool_call>")}) {
    for (size_t piece : {1, 3, 1000}) {
      const auto [sent, end] = stream(text, piece);
      EXPECT_EQ(sent, "") << text;
      ASSERT_EQ(end.calls.size(), 1u) << text;
      EXPECT_EQ(end.content, "");
    }
  }
  // JSON that is not a call is sent, whole, at the end.
  const std::string json = R"({"answer": 42})";
  const auto [sent, end] = stream(json, 2);
  EXPECT_EQ(sent, "");
  EXPECT_TRUE(end.calls.empty());
  EXPECT_EQ(end.content, json);
}

// Random replies built from the formats' pieces, whole and streamed in random pieces: the
// stream sends a prefix, finds the same calls, and without calls gives back the text exactly.
TEST(ToolCallStream, AgreesWithTheWholeReply) {
  const char* const kPieces[] = {"<tool_call>", "</tool_call>", "<|python_tag|>", "{\"name\": \"noop\"}",
                                 "{\"name\": \"get_weather\", \"parameters\": {\"a\": [1]}}", "{", "}", "\"", "\\",
                                 ";", " ", "\n", "text", "<", "<tool_", "\xff"};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 8); k < n; ++k) text += kPieces[rng() % std::size(kPieces)];
    const ParsedReply whole = parse(text);
    if (whole.calls.empty()) {
      EXPECT_EQ(whole.content, text);
    }
    for (const ToolCall& c : whole.calls) EXPECT_TRUE(nlohmann::json::parse(c.arguments, nullptr, false).is_object());
    const auto [sent, end] = stream(text, 1 + rng() % 5);
    ASSERT_EQ(text.compare(0, sent.size(), sent), 0) << text;
    ASSERT_EQ(end.calls.size(), whole.calls.size()) << text;
    if (end.calls.empty()) {
      EXPECT_EQ(sent + end.content, text);
    }
  }
}

}  // namespace
}  // namespace bitnet::server
