// The server over real HTTP on loopback: endpoints, SSE framing, errors, limits, auth, and a
// client that goes away.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace bitnet::server {
namespace {

using json = nlohmann::json;

class Server : public testing::Test {
 protected:
  void start(ServerOptions o = {}, bool load = true, int64_t n_ctx = 256, bool takes_tools = false) {
    o.port = 0;
    http_ = std::make_unique<HttpServer>(o);
    auto port = http_->bind();
    ASSERT_TRUE(port.ok()) << port.status().to_string();
    port_ = *port;
    thread_ = std::thread([this] { http_->run(); });
    if (!load) return;
    EngineOptions e;
    e.model_path = (std::filesystem::path(BITNET_SOURCE_DIR) / "models/tiny-stories-b158.gguf").string();
    e.device = "cpu";
    e.n_ctx = n_ctx;
    e.n_threads = 1;
    e.kv_block = 16;
    auto model = Model::load(e);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    model_ = std::move(*model);
    ChatRenderer chat;
    chat.takes_tools = takes_tools;
    chat.render = [this](const std::vector<ChatMessage>& m, const std::string& tools_json) -> Result<std::string> {
      std::string s;  // a plain template for the tests: "role: content" lines, then the tools
      for (const ChatMessage& msg : m) {
        s += msg.role + ": " + msg.content + "\n";
        if (!msg.tool_calls_json.empty()) s += "calls: " + msg.tool_calls_json + "\n";
        if (!msg.tool_call_id.empty()) s += "answers: " + msg.tool_call_id + "\n";
      }
      if (!tools_json.empty()) s += "tools: " + tools_json + "\n";
      std::lock_guard<std::mutex> lock(rendered_mu_);
      rendered_.push_back(s + "assistant:");
      return rendered_.back();
    };
    http_->set_model(*model_, std::move(chat));
  }
  void TearDown() override {
    if (http_) http_->stop();
    if (thread_.joinable()) thread_.join();
    http_.reset();
  }
  // A plain TCP connection to the server (no HTTP client in between); -1 when it fails.
  int connect_raw() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }

  std::unique_ptr<Model> model_;
  std::mutex rendered_mu_;
  std::vector<std::string> rendered_;  // every prompt the chat renderer made
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

void expect_api_error(const httplib::Result& r, int status, std::string_view type) {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  const json j = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r->body;
  EXPECT_EQ(j["error"]["type"], type) << r->body;
  EXPECT_TRUE(j["error"]["message"].is_string());
}

TEST_F(Server, HealthIs503WhileLoadingThen200) {
  start({}, /*load=*/false);
  auto c = client();
  auto r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  expect_api_error(c.Post("/v1/completions", R"({"prompt":"x"})", "application/json"), 503, "server_error");
}

TEST_F(Server, CompletionAndModelsAndTokenize) {
  start();
  auto c = client();
  EXPECT_EQ(c.Get("/health")->status, 200);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["object"], "model");

  auto r = c.Post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":12,"temperature":0})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);  // leading whitespace (keep-alive) is valid JSON
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + 12);
  const std::string text = j["choices"][0]["text"];
  EXPECT_FALSE(text.empty());

  auto tok = c.Post("/tokenize", R"({"content":"Once upon a time"})", "application/json");
  ASSERT_TRUE(tok);
  const json ids = json::parse(tok->body)["tokens"];
  EXPECT_FALSE(ids.empty());
  auto detok = c.Post("/detokenize", json{{"tokens", ids}}.dump(), "application/json");
  ASSERT_TRUE(detok);
  EXPECT_NE(json::parse(detok->body)["content"].get<std::string>().find("upon a time"), std::string::npos);

  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("bitnet_completion_tokens_total 12"), std::string::npos) << metrics->body;
}

TEST_F(Server, StreamIsServerSentEventsEndingWithDone) {
  start();
  auto c = client();
  std::string body;
  auto r = c.Post("/v1/chat/completions",
                  R"({"messages":[{"role":"user","content":"Tell a story"}],"max_tokens":8,"temperature":0,"stream":true,
                      "stream_options":{"include_usage":true}})",
                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::vector<std::string> events;
  for (size_t p = 0; p < r->body.size();) {
    const size_t e = r->body.find("\n\n", p);
    ASSERT_NE(e, std::string::npos) << "unterminated event";
    const std::string ev = r->body.substr(p, e - p);
    if (ev.rfind(":", 0) != 0) events.push_back(ev);  // SSE comments are keep-alives
    p = e + 2;
  }
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "data: [DONE]");
  std::string text;
  int finishes = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_EQ(events[i].rfind("data: ", 0), 0u) << events[i];
    const json j = json::parse(events[i].substr(6));
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    if (j["choices"].empty()) {
      EXPECT_EQ(j["usage"]["completion_tokens"], 8);
      continue;
    }
    const json& ch = j["choices"][0];
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) ++finishes;
  }
  EXPECT_EQ(finishes, 1);
  // The same request without streaming gives the same text.
  auto whole = c.Post("/v1/chat/completions",
                      R"({"messages":[{"role":"user","content":"Tell a story"}],"max_tokens":8,"temperature":0})",
                      "application/json");
  ASSERT_TRUE(whole);
  EXPECT_EQ(json::parse(whole->body)["choices"][0]["message"]["content"], text);
}

TEST_F(Server, BadRequestsGetOpenAiErrors) {
  ServerOptions o;
  o.max_body_bytes = 4096;
  start(o);
  auto c = client();
  expect_api_error(c.Post("/v1/completions", "{not json", "application/json"), 400, "invalid_request_error");
  expect_api_error(c.Post("/v1/completions", R"({"prompt":"x","top_p":7})", "application/json"), 400, "invalid_request_error");
  expect_api_error(c.Post("/v1/completions", std::string(10000, 'x'), "application/json"), 413, "invalid_request_error");
  expect_api_error(c.Get("/v1/nothing"), 404, "invalid_request_error");
  expect_api_error(c.Post("/detokenize", R"({"tokens":[-1]})", "application/json"), 400, "invalid_request_error");
  expect_api_error(c.Post("/detokenize", R"({"tokens":[99999999]})", "application/json"), 400, "invalid_request_error");
  // A prompt longer than the context (256) is refused up front.
  std::string long_prompt;
  for (int i = 0; i < 1500; ++i) long_prompt += "x ";
  expect_api_error(c.Post("/v1/completions", json{{"prompt", long_prompt}}.dump(), "application/json"), 400,
                   "invalid_request_error");
  EXPECT_EQ(c.Get("/health")->status, 200);  // still serving
}

constexpr const char* kToolRequest = R"({"messages":[{"role":"user","content":"Weather in Paris?"}],"max_tokens":4,
  "temperature":0,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
  "properties":{"city":{"type":"string"}}}}}],"tool_choice":"auto"})";

// A template that does not read `tools` never drops them silently: the request is refused
// with an OpenAI-shaped error that says so, and nothing is generated.
TEST_F(Server, ToolsWithATemplateWithoutToolsAre400) {
  start();
  auto c = client();
  auto r = c.Post("/v1/chat/completions", kToolRequest, "application/json");
  expect_api_error(r, 400, "invalid_request_error");
  const json j = json::parse(r->body);
  EXPECT_EQ(j["error"]["param"], "tools");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("not supported by this model's chat template"), std::string::npos);
  EXPECT_TRUE(rendered_.empty());
  // tool_choice "none": the tools are not used, so there is nothing to refuse.
  json none = json::parse(kToolRequest);
  none["tool_choice"] = "none";
  auto ok = c.Post("/v1/chat/completions", none.dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  ASSERT_EQ(rendered_.size(), 1u);
  EXPECT_EQ(rendered_[0].find("tools:"), std::string::npos);
}

// A template that reads `tools` gets them, keys in the order sent.
TEST_F(Server, ToolsReachATemplateThatReadsThem) {
  start({}, true, 256, /*takes_tools=*/true);
  auto c = client();
  auto r = c.Post("/v1/chat/completions", kToolRequest, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["role"], "assistant");
  ASSERT_EQ(rendered_.size(), 1u);
  EXPECT_NE(rendered_[0].find(R"(tools: [{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
                              R"("properties":{"city":{"type":"string"}}}}}])"),
            std::string::npos)
      << rendered_[0];
  // What cannot be honoured is refused, not ignored.
  json required = json::parse(kToolRequest);
  required["tool_choice"] = "required";
  expect_api_error(c.Post("/v1/chat/completions", required.dump(), "application/json"), 400, "invalid_request_error");
}

// The content deltas and the finish reason of a chat stream (its events, [DONE] last).
std::pair<std::string, std::string> chat_stream_text(const std::string& body) {
  std::string text, finish;
  for (size_t p = 0; p < body.size();) {
    const size_t e = body.find("\n\n", p);
    if (e == std::string::npos) break;
    const std::string ev = body.substr(p, e - p);
    p = e + 2;
    if (ev.rfind("data: {", 0) != 0) continue;
    const json j = json::parse(ev.substr(6));
    if (j["choices"].empty()) continue;
    const json& ch = j["choices"][0];
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  return {text, finish};
}

// With tools, a reply that is not a tool call comes back as text, streamed too (held back
// only while it may still be one); the history's tool calls and results reach the template,
// each call's arguments as an object. (tool_calls_test.cpp: replies that are calls.)
TEST_F(Server, ToolCallHistoryAndATextReply) {
  start({}, true, 512, /*takes_tools=*/true);
  auto c = client();
  json req = json::parse(kToolRequest);
  req["max_tokens"] = 8;
  req["messages"] = json::parse(R"([{"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"a\": 1}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"}])");
  auto r = c.Post("/v1/chat/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json choice = json::parse(r->body)["choices"][0];
  EXPECT_FALSE(choice["message"].contains("tool_calls")) << r->body;
  ASSERT_TRUE(choice["message"]["content"].is_string());
  EXPECT_NE(choice["finish_reason"], "tool_calls");
  ASSERT_EQ(rendered_.size(), 1u);
  EXPECT_NE(rendered_[0].find("assistant: \ncalls: [{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
                              "\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"a\":1}}}]\ntool: 21 degrees\nanswers: call_1\n"),
            std::string::npos)
      << rendered_[0];

  req["stream"] = true;
  auto s = c.Post("/v1/chat/completions", req.dump(), "application/json");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200) << s->body;
  EXPECT_EQ(s->body.find("tool_calls"), std::string::npos);
  const auto [text, finish] = chat_stream_text(s->body);
  EXPECT_EQ(text, choice["message"]["content"]);
  EXPECT_EQ(finish, choice["finish_reason"]);

  // Malformed history is refused, naming the field.
  for (const char* bad : {R"([{"role": "user", "content": "x", "tool_calls": []}])",
                          R"([{"role": "assistant", "tool_calls": [{"type": "function"}]}])",
                          R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 5}}]}])",
                          R"([{"role": "assistant", "tool_calls": "x"}])",
                          R"([{"role": "tool", "tool_call_id": 5, "content": "x"}])"}) {
    json b = json::parse(kToolRequest);
    b["messages"] = json::parse(bad);
    auto e = c.Post("/v1/chat/completions", b.dump(), "application/json");
    expect_api_error(e, 400, "invalid_request_error");
    EXPECT_EQ(json::parse(e->body)["error"]["param"], "messages") << bad;
  }
}

TEST_F(Server, ApiKeyIsRequiredWhenSet) {
  ServerOptions o;
  o.api_key = "sekrit";
  start(o);
  auto c = client();
  expect_api_error(c.Get("/v1/models"), 401, "authentication_error");
  httplib::Headers wrong = {{"Authorization", "Bearer sekrit2"}};
  expect_api_error(c.Get("/v1/models", wrong), 401, "authentication_error");
  httplib::Headers right = {{"Authorization", "Bearer sekrit"}};
  EXPECT_EQ(c.Get("/v1/models", right)->status, 200);
  EXPECT_EQ(c.Get("/health")->status, 200);  // health needs no key
}

TEST_F(Server, AClientThatGoesAwayStopsItsGeneration) {
  start({}, true, /*n_ctx=*/4096);
  {
    // A raw client: sends a streaming request, reads the first bytes of the answer, hangs up.
    const int fd = connect_raw();
    ASSERT_GE(fd, 0);
    const std::string body = R"({"prompt":"Once upon a time","max_tokens":4000,"temperature":0,"stream":true})";
    const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
    char buf[256];
    ASSERT_GT(::recv(fd, buf, sizeof(buf), 0), 0);  // the stream has started
    ::close(fd);
  }
  // The server notices at its next write, stops, and serves the next request.
  auto c = client();
  for (int i = 0; i < 100; ++i) {
    auto m = c.Get("/metrics");
    if (m && m->body.find("bitnet_requests_cancelled_total 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("bitnet_requests_cancelled_total 1"), std::string::npos) << m->body;
  const std::string key = "\nbitnet_completion_tokens_total ";
  const size_t at = m->body.find(key);
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stoll(m->body.substr(at + key.size())), 1000);  // stopped long before 4000 tokens
  EXPECT_NE(m->body.find("\nbitnet_kv_positions_used 0\n"), std::string::npos) << m->body;  // its blocks are back
  auto r = c.Post("/v1/completions", R"({"prompt":"Once","max_tokens":4,"temperature":0})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}


TEST_F(Server, AFullQueueAnswers503WithRetryAfter) {
  ServerOptions o;
  o.max_queue = 1;
  o.parallel = 1;
  start(o, true, /*n_ctx=*/4096);
  const std::string long_request = R"({"prompt":"Once upon a time","max_tokens":1500,"temperature":0})";
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 2; ++i) {
    clients.emplace_back([&] {
      auto c = client();
      auto r = c.Post("/v1/completions", long_request, "application/json");
      if (r && r->status == 200) ++ok;
    });
    // The first is running, the second waits in the queue.
    auto c = client();
    for (int k = 0; k < 200; ++k) {
      auto m = c.Get("/metrics");
      if (m && m->body.find(i == 0 ? "bitnet_batch_size 1" : "bitnet_queue_depth 1") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  auto c = client();
  auto r = c.Post("/v1/completions", long_request, "application/json");
  expect_api_error(r, 503, "server_error");
  EXPECT_FALSE(r->get_header_value("Retry-After").empty());
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok, 2);
}


std::string completion_text(httplib::Client& c, const std::string& prompt, int max_tokens) {
  const json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  if (!r || r->status != 200) return "<error>";
  return json::parse(r->body)["choices"][0]["text"];
}

// Continuous batching: 8 clients at once (several steps hold 4 sequences, prompts of
// different lengths prefill next to decode tokens) get exactly the text each gets alone.
TEST_F(Server, ConcurrentClientsGetWhatEachGetsAlone) {
  ServerOptions o;
  o.parallel = 4;
  start(o, true, /*n_ctx=*/2048);
  const std::vector<std::string> prompts = {"Once upon a time", "The dog", "Lily and Tom went to the park. They",
                                            "One day", "The sun was", "Max had a red ball", "She", "In a small town"};
  std::vector<std::string> alone;
  {
    auto c = client();
    for (const std::string& p : prompts) alone.push_back(completion_text(c, p, 40));
  }
  std::vector<std::string> together(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      auto c = client();
      together[i] = completion_text(c, prompts[i], 40);
    });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i], alone[i]) << prompts[i];
  auto m = client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("bitnet_requests_total 16\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("bitnet_batch_size_peak 4\n"), std::string::npos) << m->body;  // steps held 4 sequences
}

// A second request with the same start (a system prompt, a chat history) reuses the cached
// sequence: the hit and the reused tokens show in /metrics and in the response's usage.
TEST_F(Server, ASharedPrefixComesFromTheCache) {
  start({}, true, /*n_ctx=*/2048);
  auto c = client();
  const std::string system = "Once upon a time, there was a little girl named Lily. She loved to play outside.";
  ASSERT_NE(completion_text(c, system + " One day", 8), "<error>");
  const json body = {{"prompt", system + " Her mom said"}, {"max_tokens", 8}, {"temperature", 0}};
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json j = json::parse(r->body);
  EXPECT_GT(j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 15);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("bitnet_prefix_cache_hits_total 1"), std::string::npos) << m->body;
}


// Runs `command`, returning its standard output.
std::string run_command(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  ::pclose(p);
  return out;
}

// The page at "/" in Debian's headless Chromium: `/?prompt=...&sync=1` sends a message while
// the page loads (a headless browser dumps the page at load; a stream would race it), the
// reply is rendered (the DOM holds it, with its tokens/s), and a screenshot of the page with
// the reply is larger than one of the empty page. Streaming is checked over HTTP above.
TEST_F(Server, WebPageShowsAReplyInAHeadlessBrowser) {
  const char* browser = "/usr/bin/chromium";
  if (::access(browser, X_OK) != 0) GTEST_SKIP() << "no " << browser << " (Debian package chromium)";
  start();
  const std::string base = "http://127.0.0.1:" + std::to_string(port_) + "/";
  const std::string flags = std::string(browser) +
                            " --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=" +
                            (std::filesystem::temp_directory_path() / ("bitnet-chromium-" + std::to_string(::getpid()))).string() +
                            " --virtual-time-budget=20000 --window-size=900,700 ";
  const std::string dom = run_command(flags + "--dump-dom '" + base + "?prompt=Tell%20me%20a%20story&max_tokens=16&sync=1' 2>/dev/null");
  const size_t at = dom.find("class=\"msg assistant\"");
  ASSERT_NE(at, std::string::npos) << dom;
  const size_t reply = dom.find("<span class=\"reply\">", at);
  ASSERT_NE(reply, std::string::npos) << dom;
  const size_t text = reply + std::string("<span class=\"reply\">").size();
  EXPECT_NE(dom.compare(text, 7, "</span>"), 0) << "the reply is empty: " << dom.substr(at, 300);
  EXPECT_NE(dom.find("tokens/s", at), std::string::npos) << dom.substr(at, 300);

  const auto shot = [&](const std::string& url, const std::string& name) {
    const auto path = std::filesystem::temp_directory_path() / (name + std::to_string(::getpid()) + ".png");
    run_command(flags + "--screenshot=" + path.string() + " '" + url + "' 2>/dev/null");
    std::ifstream in(path, std::ios::binary);
    std::string png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::filesystem::remove(path);
    return png;
  };
  const std::string empty = shot(base, "bitnet-empty-");
  const std::string with_reply = shot(base + "?prompt=Tell%20me%20a%20story&max_tokens=16&sync=1", "bitnet-reply-");
  ASSERT_GT(with_reply.size(), 8u);
  EXPECT_EQ(with_reply.substr(1, 3), "PNG");
  EXPECT_GT(with_reply.size(), empty.size());  // text drawn where the empty page has none
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("bitnet-chromium-" + std::to_string(::getpid())), ec);
}


// A client that sends half a request and then nothing (slowloris) is cut off by the read
// timeout; the server answers everyone else meanwhile and afterwards.
TEST_F(Server, ASlowClientIsCutOffByTheReadTimeout) {
  ServerOptions o;
  o.read_timeout_s = 1;
  start(o);
  const int fd = connect_raw();
  ASSERT_GE(fd, 0);
  const std::string half = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"prompt\":";
  ASSERT_EQ(::send(fd, half.data(), half.size(), 0), static_cast<ssize_t>(half.size()));
  auto c = client();
  auto r = c.Post("/v1/completions", R"({"prompt":"Once","max_tokens":4,"temperature":0})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Within a few seconds the server gives up on the slow one: its socket reads end of stream
  // (or an error), not a hang.
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[512];
  const auto t0 = std::chrono::steady_clock::now();
  ssize_t n = 0;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ::close(fd);
  EXPECT_EQ(c.Get("/health")->status, 200);
}

}  // namespace
}  // namespace bitnet::server
