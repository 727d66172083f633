// Request parsing: every field typed and bounded, errors in OpenAI's shape.
#include "server/request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace bitnet::server {
namespace {

ParseResult parse(std::string_view body, bool chat = false) { return parse_generation_request(body, chat, RequestLimits{}); }

void expect_error(std::string_view body, bool chat, int status, std::string_view param) {
  const ParseResult r = parse(body, chat);
  ASSERT_FALSE(r.request.has_value()) << body;
  EXPECT_EQ(r.error.status, status) << body;
  EXPECT_EQ(r.error.param, param) << body;
  EXPECT_FALSE(r.error.message.empty());
}

TEST(Request, Completion) {
  const ParseResult r = parse(R"({"model":"m","prompt":"Once","max_tokens":5,"temperature":0,"top_k":3,"top_p":0.5,
                                  "min_p":0.1,"seed":42,"stop":["\n","END"],"stream":true,"repeat_penalty":1.1,
                                  "stream_options":{"include_usage":true}})");
  ASSERT_TRUE(r.request.has_value()) << r.error.message;
  const GenerationRequest& g = *r.request;
  EXPECT_EQ(g.prompt, "Once");
  EXPECT_EQ(g.max_tokens, 5);
  EXPECT_EQ(g.sampling.temperature, 0.0f);
  EXPECT_EQ(g.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(g.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(g.sampling.seed, 42u);
  EXPECT_TRUE(g.seed_given);
  EXPECT_EQ(g.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(g.stream);
  EXPECT_TRUE(g.include_usage);
  EXPECT_EQ(g.model, "m");
  EXPECT_EQ(parse(R"({"prompt":["one"],"stop":"x"})").request->stop, std::vector<std::string>{"x"});
}

TEST(Request, Chat) {
  const ParseResult r = parse(R"({"messages":[{"role":"system","content":"Be brief."},
                                              {"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"!"}]}]})",
                              true);
  ASSERT_TRUE(r.request.has_value()) << r.error.message;
  ASSERT_EQ(r.request->messages.size(), 2u);
  EXPECT_EQ(r.request->messages[1].content, "Hi!");
  EXPECT_EQ(r.request->max_tokens, 0);
  EXPECT_FALSE(r.request->seed_given);
}

TEST(Request, BadInputIsAClearError) {
  expect_error("", false, 400, "");
  expect_error("{", false, 400, "");
  expect_error("[1]", false, 400, "");
  expect_error(R"({"max_tokens":5})", false, 400, "prompt");
  expect_error(R"({"prompt":5})", false, 400, "prompt");
  expect_error(R"({"prompt":"x","max_tokens":-1})", false, 400, "max_tokens");
  expect_error(R"({"prompt":"x","max_tokens":1e30})", false, 400, "max_tokens");
  expect_error(R"({"prompt":"x","max_tokens":18446744073709551615})", false, 400, "max_tokens");
  expect_error(R"({"prompt":"x","max_tokens":"5"})", false, 400, "max_tokens");
  expect_error(R"({"prompt":"x","n_predict":100000000})", false, 400, "n_predict");
  expect_error(R"({"prompt":"x","temperature":3})", false, 400, "temperature");
  expect_error(R"({"prompt":"x","top_p":-0.1})", false, 400, "top_p");
  expect_error(R"({"prompt":"x","top_k":1.5})", false, 400, "top_k");
  expect_error(R"({"prompt":"x","seed":"abc"})", false, 400, "seed");
  expect_error(R"({"prompt":"x","stop":[1]})", false, 400, "stop");
  expect_error(R"({"prompt":"x","stop":["a","b","c","d","e"]})", false, 400, "stop");
  expect_error(R"({"prompt":"x","stop":[""]})", false, 400, "stop");
  expect_error(R"({"prompt":"x","stream":"yes"})", false, 400, "stream");
  expect_error(R"({"prompt":"x","n":2})", false, 400, "n");
  expect_error(R"({"messages":[]})", true, 400, "messages");
  expect_error(R"({"messages":[{"content":"x"}]})", true, 400, "messages");
  expect_error(R"({"messages":[{"role":"wizard","content":"x"}]})", true, 400, "messages");
  expect_error(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", true, 400, "messages");
  // Found by the fuzz test: a part whose type is not a string threw from nlohmann::json.
  expect_error(R"({"messages":[{"role":"user","content":[{"type":5,"text":"x"}]}]})", true, 400, "messages");
  RequestLimits small;
  small.max_prompt_chars = 4;
  const ParseResult big = parse_generation_request(R"({"prompt":"hello"})", false, small);
  ASSERT_FALSE(big.request.has_value());
  EXPECT_EQ(big.error.status, 413);
}

TEST(Request, ErrorJsonHasOpenAisShape) {
  const auto j = nlohmann::json::parse(error_json({400, "invalid_request_error", "top_p", "bad \xff value"}));
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "top_p");
  EXPECT_EQ(j["error"]["code"], 400);
  EXPECT_TRUE(j["error"]["message"].is_string());  // invalid UTF-8 replaced, never a throw
  EXPECT_TRUE(nlohmann::json::parse(error_json({500, "server_error", "", "x"}))["error"]["param"].is_null());
}

// OpenAI's tools schema: function tools are kept (keys in the order sent) for the template;
// malformed ones, and tool choices nothing here can honour, are 400s naming the field.
TEST(Request, ChatTools) {
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  const std::string tool = R"({"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","b":1,"a":2},"strict":false}})";
  const ParseResult r = parse("{" + msgs + R"(,"tools":[)" + tool + R"(],"tool_choice":"auto","parallel_tool_calls":true})", true);
  ASSERT_TRUE(r.request.has_value()) << r.error.message;
  EXPECT_EQ(r.request->tools_json, "[" + tool + "]");
  EXPECT_TRUE(parse("{" + msgs + R"(,"tools":[)" + tool + "]}", true).request->tools_json.size() > 2);
  EXPECT_TRUE(parse("{" + msgs + R"(,"tools":[)" + tool + R"(],"tool_choice":"none"})", true).request->tools_json.empty());
  EXPECT_TRUE(parse("{" + msgs + R"(,"tools":null})", true).request->tools_json.empty());
  EXPECT_TRUE(parse("{" + msgs + "}", true).request->tools_json.empty());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"("tools":{})", "tools"},
      {R"("tools":[1])", "tools"},
      {R"("tools":[{"type":"retrieval"}])", "tools"},
      {R"("tools":[{"type":"function"}])", "tools"},
      {R"("tools":[{"type":"function","function":{"name":""}}])", "tools"},
      {R"("tools":[{"type":"function","function":{"name":"has space"}}])", "tools"},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":"x"}}])", "tools"},
      {R"("tools":[{"type":"function","function":{"name":"f","description":3}}])", "tools"},
      {R"("tool_choice":"auto")", "tool_choice"},  // no tools
      {R"("tools":[)" + tool + R"(],"tool_choice":"sometimes")", "tool_choice"},
      {R"("tools":[)" + tool + R"(],"tool_choice":"required")", "tool_choice"},
      {R"("tools":[)" + tool + R"(],"tool_choice":{"type":"function","function":{"name":"get_weather"}})", "tool_choice"},
      {R"("tools":[)" + tool + R"(],"parallel_tool_calls":"yes")", "parallel_tool_calls"},
  };
  for (const auto& [fields, param] : bad) expect_error("{" + msgs + "," + fields + "}", true, 400, param);
  expect_error(R"({"prompt":"x","tools":[]})", false, 400, "tools");  // a chat parameter
  EXPECT_EQ(r.request->tool_names, std::vector<std::string>{"get_weather"});
  EXPECT_TRUE(parse("{" + msgs + R"(,"tools":[)" + tool + R"(],"tool_choice":"none"})", true).request->tool_names.empty());
}

// A history with tool calls and their results: the calls for the template with each
// `arguments` string that holds an object as that object (keys in the order sent).
TEST(Request, ToolCallsAndResultsInTheHistory) {
  const ParseResult r = parse(R"({"messages":[{"role":"user","content":"Weather?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":"get_weather","arguments":"{\"z\": 1, \"a\": [2]}"}},
                                                     {"function":{"name":"noop","arguments":"not json"}},
                                                     {"id":"x","function":{"name":"obj","arguments":{"k":"v"}}}]},
    {"role":"tool","tool_call_id":"call_9","content":"21"}]})", true);
  ASSERT_TRUE(r.request.has_value()) << r.error.message;
  const std::vector<ChatMessage>& m = r.request->messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].content, "");
  EXPECT_EQ(m[1].tool_calls_json,
            R"([{"id":"call_9","type":"function","function":{"name":"get_weather","arguments":{"z":1,"a":[2]}}},)"
            R"({"id":"","type":"function","function":{"name":"noop","arguments":"not json"}},)"
            R"({"id":"x","type":"function","function":{"name":"obj","arguments":{"k":"v"}}}])");
  EXPECT_EQ(m[2].tool_call_id, "call_9");
  EXPECT_TRUE(m[0].tool_calls_json.empty() && m[0].tool_call_id.empty());
  const std::string deep_args = std::string(R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":")") +
                                std::string(1000, '[') + R"("}}]}]})";
  expect_error(deep_args, true, 400, "messages");
}

// Bodies nesting deeper than any request needs are refused before anything walks them.
TEST(Request, DeepNestingIsRefused) {
  const std::string deep = R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"a":)" +
                           std::string(200000, '[') + std::string(200000, ']') + "}}}]}";
  expect_error(deep, true, 400, "");
  expect_error(R"({"prompt":"x","stop":)" + std::string(100, '[') + std::string(100, ']') + "}", false, 400, "");
}

}  // namespace
}  // namespace bitnet::server
