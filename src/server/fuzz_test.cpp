// The request fuzz target's body (fuzz_entry.h) over deterministic mutations of valid request
// bodies under plain ctest: errors are expected, a crash or a failed check is a bug.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "server/fuzz_entry.h"

namespace bitnet::server {
namespace {

const char* const kSeeds[] = {
    R"({"prompt":"Once upon a time","max_tokens":16,"temperature":0.7,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":42,"stop":["\n","END"],"stream":true,"stream_options":{"include_usage":true}})",
    R"({"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}],"max_completion_tokens":8,"repeat_penalty":1.1})",
    R"({"prompt":["one"],"n":1,"n_predict":4,"seed":18446744073709551615})",
    R"({"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"21"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"tool_choice":"auto"})",
    // Model replies with tool calls (the body is also parsed as one).
    R"(<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "n": [1, {"a": "}"}]}}; {"name": "f", "arguments": "{}"})",
    "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"\\\"Z\\u00fcrich\"}}\n</tool_call>\n<tool_call>{\"name\": \"f\"}</tool_call>",
};
// Tokens that break parsers: numbers at the edges, deep nesting, odd UTF-8.
const char* const kInteresting[] = {
    "-1", "0", "1e308", "-1e308", "1e-320", "NaN", "Infinity", "18446744073709551616", "-9223372036854775809",
    "9223372036854775807", "null", "true", "[]", "{}", "\"\"", "\"\\u0000\"", "\"\\ud800\"", "\"\xff\xfe\"",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "\"stop\"", "1.5",
    "<tool_call>", "</tool_call>", "<|python_tag|>", "{\"name\": \"f\"}", "\\\"", "}", ";",
};

std::string mutate(const std::string& base, std::mt19937_64& rng) {
  std::string s = base;
  const int n = 1 + static_cast<int>(rng() % 3);
  for (int m = 0; m < n && !s.empty(); ++m) {
    const size_t at = rng() % s.size();
    switch (rng() % 5) {
      case 0: s[at] = static_cast<char>(rng() % 256); break;
      case 1: s.resize(at); break;
      case 2: s.insert(at, kInteresting[rng() % std::size(kInteresting)]); break;
      case 3: {  // replace a value after a ':' with an interesting token
        const size_t colon = s.find(':', at);
        if (colon == std::string::npos) break;
        const size_t end = s.find_first_of(",}", colon);
        s.replace(colon + 1, end == std::string::npos ? std::string::npos : end - colon - 1,
                  kInteresting[rng() % std::size(kInteresting)]);
        break;
      }
      default: s.erase(at, 1 + rng() % 8); break;
    }
  }
  return s;
}

TEST(RequestFuzz, MutatedBodiesNeverCrash) {
  std::mt19937_64 rng(2026);
  int inputs = 0;
  for (const char* seed : kSeeds) {
    for (int i = 0; i < 4000; ++i) {
      const std::string body = mutate(seed, rng);
      request_fuzz_one(reinterpret_cast<const uint8_t*>(body.data()), body.size());
      ++inputs;
    }
  }
  EXPECT_EQ(inputs, 4000 * static_cast<int>(std::size(kSeeds)));
}

}  // namespace
}  // namespace bitnet::server
