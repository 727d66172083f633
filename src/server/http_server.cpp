#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "server/generation.h"
#include "server/metrics.h"
#include "server/openapi.h"
#include "server/raw_exchange.h"
#include "server/scheduler.h"
#include "server/tool_calls.h"
#include "server/web_ui.h"

namespace bitnet::server {

namespace {

using json = nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Equal strings, in time that depends only on their lengths.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_json(e), "application/json");
}

ApiError status_error(const Status& st) {
  const int code = st.code() == StatusCode::kOutOfRange || st.code() == StatusCode::kInvalidArgument ? 400
                   : st.code() == StatusCode::kUnavailable                                           ? 503
                                                                                                     : 500;
  return {code, code == 400 ? "invalid_request_error" : "server_error", "", st.message()};
}

// Text deltas from the worker to the connection's thread.
class Channel {
 public:
  void push(std::string_view s) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.emplace_back(s);
    }
    cv_.notify_one();
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_one();
  }
  // Waits up to `wait` for items; returns them (and whether the channel is closed and drained).
  std::deque<std::string> take(std::chrono::milliseconds wait, bool& finished) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, wait, [&] { return closed_ || !items_.empty(); });
    std::deque<std::string> out;
    out.swap(items_);
    finished = closed_;
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> items_;
  bool closed_ = false;
};

}  // namespace

struct HttpServer::Impl {
  ServerOptions opt;
  RawServer http;  // httplib::Server, plus handle_raw's socket-free entry point
  Metrics metrics;
  std::atomic<Model*> loaded{nullptr};  // set once the model is loaded
  ChatRenderer chat;
  std::unique_ptr<Scheduler> scheduler;
  std::atomic<int64_t> next_id{1};

  bool authorized(const httplib::Request& req, httplib::Response& res) {
    if (opt.api_key.empty()) return true;
    const std::string auth = req.get_header_value("Authorization");
    const std::string_view prefix = "Bearer ";
    const bool ok = auth.size() > prefix.size() && auth.compare(0, prefix.size(), prefix) == 0 &&
                    constant_time_equal(std::string_view(auth).substr(prefix.size()), opt.api_key);
    if (!ok) send_error(res, {401, "authentication_error", "", "invalid or missing API key (Authorization: Bearer ...)"});
    return ok;
  }

  Model* ready(httplib::Response& res) {
    Model* e = loaded.load();
    if (e == nullptr) {
      res.set_header("Retry-After", "5");
      send_error(res, {503, "server_error", "", "the model is loading"});
    }
    return e;
  }

  void routes();
  void completion(const httplib::Request& req, httplib::Response& res, bool chat);
};

void HttpServer::Impl::routes() {
  http.set_read_timeout(opt.read_timeout_s, 0);
  http.set_write_timeout(opt.write_timeout_s, 0);
  http.set_keep_alive_timeout(std::min(opt.read_timeout_s, 5));  // an idle connection holds a worker thread
  http.set_payload_max_length(opt.max_body_bytes);
  http.new_task_queue = [n = opt.threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!opt.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", opt.cors_origin);
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      if (req.method == "OPTIONS") {
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    // The page itself and /health need no key; the API calls the page makes do.
    if (req.path == "/health" || req.path == "/") return httplib::Server::HandlerResponse::Unhandled;
    return authorized(req, res) ? httplib::Server::HandlerResponse::Unhandled : httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string msg = res.status == 404   ? "no such endpoint"
                            : res.status == 413 ? "the request body is too large"
                            : res.status == 405 ? "method not allowed"
                                                : "bad request";
    send_error(res, {res.status, "invalid_request_error", "", msg});
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, {500, "server_error", "", "internal error"});
  });

  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(web_ui_html()), "text/html; charset=utf-8");
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (loaded.load() == nullptr) {
      res.status = 503;
      res.set_content(R"({"status":"loading model"})", "application/json");
    } else {
      res.set_content(R"({"status":"ok"})", "application/json");
    }
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json j = {{"object", "list"},
                    {"data", json::array({{{"id", opt.model_id}, {"object", "model"}, {"created", unix_now()},
                                           {"owned_by", "bitnet"}}})}};
    res.set_content(dump(j), "application/json");
  });
  http.Get("/openapi.json", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(openapi_json()), "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.prometheus(), "text/plain; version=0.0.4");
  });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    Model* e = ready(res);
    if (e == nullptr) return;
    const json j = json::parse(req.body, nullptr, false);
    if (!j.is_object() || !j.contains("content") || !j["content"].is_string()) {
      return send_error(res, {400, "invalid_request_error", "content", "'content' must be a string"});
    }
    if (j["content"].get_ref<const std::string&>().size() > static_cast<size_t>(opt.limits.max_prompt_chars)) {
      return send_error(res, {413, "invalid_request_error", "content", "'content' is too long"});
    }
    const auto flag = [&](const char* key, bool fallback) {
      const auto it = j.find(key);
      return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
    };
    const bool add_special = flag("add_special", false);
    const bool parse_special = flag("parse_special", true);
    const std::vector<int32_t> ids = e->tokenize(j["content"].get<std::string>(), add_special && e->add_bos_default(), parse_special);
    res.set_content(dump({{"tokens", ids}}), "application/json");
  });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    Model* e = ready(res);
    if (e == nullptr) return;
    const json j = json::parse(req.body, nullptr, false);
    if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array() ||
        j["tokens"].size() > static_cast<size_t>(opt.limits.max_prompt_chars)) {
      return send_error(res, {400, "invalid_request_error", "tokens", "'tokens' must be an array of token ids"});
    }
    std::vector<int32_t> ids;
    for (const json& t : j["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= e->n_vocab()) {
        return send_error(res, {400, "invalid_request_error", "tokens", "token ids must be integers within the vocabulary"});
      }
      ids.push_back(t.get<int32_t>());
    }
    res.set_content(dump({{"content", e->detokenize(ids)}}), "application/json");
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { completion(req, res, false); });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { completion(req, res, true); });
}

void HttpServer::Impl::completion(const httplib::Request& req, httplib::Response& res, bool chat_api) {
  Model* e = ready(res);
  if (e == nullptr) return;
  ParseResult parsed = parse_generation_request(req.body, chat_api, opt.limits);
  if (!parsed.request) {
    ++metrics.requests_rejected;
    return send_error(res, parsed.error);
  }
  auto job = std::make_shared<Job>();
  job->request = std::move(*parsed.request);
  const GenerationRequest& r = job->request;
  std::string prompt_text = r.prompt;
  if (chat_api) {
    if (!chat.render) return send_error(res, {400, "invalid_request_error", "messages", "this model has no chat template"});
    if (!r.tools_json.empty() && !chat.takes_tools) {
      ++metrics.requests_rejected;
      return send_error(res, {400, "invalid_request_error", "tools",
                              "tools are not supported by this model's chat template (it does not read `tools`)"});
    }
    Result<std::string> rendered = chat.render(r.messages, r.tools_json);
    if (!rendered.ok()) {
      ++metrics.requests_rejected;
      return send_error(res, {400, "invalid_request_error", "messages", rendered.status().message()});
    }
    prompt_text = std::move(*rendered);
  }
  // BOS as the vocabulary wants it, unless a chat template already wrote its text (as `bitnet
  // chat` does); special tokens in the text are recognised, as llama-server does.
  const std::string bos = e->bos_token();
  const bool has_bos = chat_api && !bos.empty() && prompt_text.compare(0, bos.size(), bos) == 0;
  job->prompt = e->tokenize(prompt_text, e->add_bos_default() && !has_bos, /*parse_special=*/true);
  if (job->prompt.empty()) return send_error(res, {400, "invalid_request_error", "prompt", "the prompt is empty"});
  const int64_t room = e->n_ctx() - static_cast<int64_t>(job->prompt.size());
  if (room <= 0) {
    ++metrics.requests_rejected;
    return send_error(res, {400, "invalid_request_error", chat_api ? "messages" : "prompt",
                            fmt::format("the prompt has {} tokens; the context holds {}", job->prompt.size(), e->n_ctx())});
  }
  job->max_tokens = std::min(r.max_tokens > 0 ? r.max_tokens : opt.limits.max_tokens, room);

  if (!job->request.seed_given) job->request.sampling.seed = std::random_device{}();
  auto channel = std::make_shared<Channel>();
  job->on_text = [channel](std::string_view delta) {
    channel->push(delta);
    return true;
  };
  std::future<Result<GenerationResult>> done = job->done.get_future();
  if (!scheduler->submit(job)) {
    ++metrics.requests_rejected;
    res.set_header("Retry-After", "2");
    return send_error(res, {503, "server_error", "", "the server is busy (queue full); retry later"});
  }
  ++metrics.requests;
  const std::string id = fmt::format("{}-{}", chat_api ? "chatcmpl" : "cmpl", next_id++);
  const int64_t created = unix_now();
  const std::string model = opt.model_id;
  const std::vector<std::string> tool_names = r.tool_names;  // empty: no tools (or tool_choice "none")
  // Finishes the job's future on the worker: the channel closes when the result is ready.
  auto shared_done = std::make_shared<std::shared_future<Result<GenerationResult>>>(done.share());
  // Once the response is over (written whole, failed, or never written: httplib skips the
  // provider of a server that is stopping) the job is cancelled and waited for, so that no
  // generation steps after its response has been written (found by fuzz_server).
  const auto release = [job, shared_done, sched = scheduler.get()](bool) {
    sched->cancel(job);
    shared_done->wait();
  };

  const auto usage_json = [](const GenerationResult& g) {
    return json{{"prompt_tokens", g.prompt_tokens},
                {"completion_tokens", g.completion_tokens},
                {"total_tokens", g.prompt_tokens + g.completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", g.cached_tokens}}}};
  };
  const auto timings_json = [](const GenerationResult& g) {
    return json{{"prompt_n", g.prompt_tokens - g.cached_tokens},
                {"prompt_ms", g.prompt_seconds * 1e3},
                {"cache_n", g.cached_tokens},
                {"predicted_n", g.completion_tokens},
                {"predicted_ms", g.generation_seconds * 1e3},
                {"predicted_per_second", g.generation_seconds > 0 ? static_cast<double>(g.completion_tokens) / g.generation_seconds : 0.0}};
  };

  if (!r.stream) {
    // Whitespace before the JSON while waiting (valid JSON) lets a write find a vanished client.
    res.set_chunked_content_provider("application/json", [=](size_t, httplib::DataSink& sink) {
      for (;;) {
        if (shared_done->wait_for(std::chrono::seconds(1)) == std::future_status::ready) break;
        if (!sink.write(" ", 1)) {
          job->cancel = true;
          return false;
        }
      }
      const Result<GenerationResult>& g = shared_done->get();
      std::string body;
      if (!g.ok()) {
        body = error_json(status_error(g.status()));
      } else {
        json choice = {{"index", 0}, {"finish_reason", g->finish_reason}};
        if (chat_api) {
          choice["message"] = {{"role", "assistant"}, {"content", g->text}};
          if (!tool_names.empty()) {
            ParsedReply reply = parse_tool_calls(g->text, tool_names);
            if (!reply.calls.empty()) {
              choice["message"]["content"] = reply.content.empty() ? json(nullptr) : json(reply.content);
              choice["message"]["tool_calls"] = openai_tool_calls(reply.calls, false);
              choice["finish_reason"] = "tool_calls";
            }
          }
        } else {
          choice["text"] = g->text;
          choice["logprobs"] = nullptr;
        }
        body = dump({{"id", id}, {"object", chat_api ? "chat.completion" : "text_completion"}, {"created", created},
                     {"model", model}, {"choices", json::array({choice})}, {"usage", usage_json(*g)},
                     {"timings", timings_json(*g)}});
      }
      sink.write(body.data(), body.size());
      sink.done();
      return true;
    }, release);
    return;
  }

  const bool include_usage = r.include_usage;
  // With tools, text that may be a tool call is held back and sent, parsed, at the end.
  auto tool_stream = tool_names.empty() ? nullptr : std::make_shared<ToolCallStream>();
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx: do not buffer the stream
  res.set_chunked_content_provider("text/event-stream", [=](size_t, httplib::DataSink& sink) {
    const auto send = [&](const std::string& data) {
      const std::string frame = "data: " + data + "\n\n";
      return sink.write(frame.data(), frame.size());
    };
    const auto chunk = [&](const json& delta_or_text, const json& finish) {
      json choice = {{"index", 0}, {"finish_reason", finish}};
      if (chat_api) {
        choice["delta"] = delta_or_text;
      } else {
        choice["text"] = delta_or_text;
        choice["logprobs"] = nullptr;
      }
      return dump({{"id", id}, {"object", chat_api ? "chat.completion.chunk" : "text_completion"}, {"created", created},
                   {"model", model}, {"choices", json::array({choice})}});
    };
    if (chat_api && !send(chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr))) {
      job->cancel = true;
      return false;
    }
    auto last_write = std::chrono::steady_clock::now();
    for (;;) {
      bool finished = false;
      const bool ready = shared_done->wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
      std::deque<std::string> deltas = channel->take(std::chrono::milliseconds(ready ? 0 : 100), finished);
      for (std::string& d : deltas) {
        if (tool_stream) d = tool_stream->push(d);
        if (d.empty()) continue;
        if (!send(chunk(chat_api ? json{{"content", d}} : json(d), nullptr))) {
          job->cancel = true;
          return false;
        }
        last_write = std::chrono::steady_clock::now();
      }
      if (ready && deltas.empty()) break;
      // An SSE comment now and then: a write is how a vanished client is noticed.
      if (std::chrono::steady_clock::now() - last_write > std::chrono::seconds(1)) {
        if (!sink.write(":\n\n", 3)) {
          job->cancel = true;
          return false;
        }
        last_write = std::chrono::steady_clock::now();
      }
    }
    const Result<GenerationResult>& g = shared_done->get();
    if (!g.ok()) {
      send(error_json(status_error(g.status())));
    } else {
      std::string finish_reason = g->finish_reason;
      if (tool_stream) {
        const ParsedReply reply = tool_stream->finish(tool_names);
        if (!reply.content.empty()) send(chunk(json{{"content", reply.content}}, nullptr));
        if (!reply.calls.empty()) {
          send(chunk(json{{"tool_calls", openai_tool_calls(reply.calls, true)}}, nullptr));
          finish_reason = "tool_calls";
        }
      }
      send(chunk(chat_api ? json::object() : json(""), finish_reason));
      if (include_usage) {
        send(dump({{"id", id}, {"object", chat_api ? "chat.completion.chunk" : "text_completion"}, {"created", created},
                   {"model", model}, {"choices", json::array()}, {"usage", usage_json(*g)}, {"timings", timings_json(*g)}}));
      }
    }
    send("[DONE]");
    sink.done();
    return true;
  }, release);
}

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->opt = std::move(options);
  impl_->routes();
}

HttpServer::~HttpServer() {
  stop();
  impl_->scheduler.reset();
}

Result<int> HttpServer::bind() {
  const ServerOptions& o = impl_->opt;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) return unavailable(fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)", o.host, o.port));
  return port;
}

void HttpServer::run() { impl_->http.listen_after_bind(); }

void HttpServer::stop() { impl_->http.stop(); }

std::string HttpServer::handle_raw(std::string_view request) { return impl_->http.exchange(request); }

void HttpServer::set_model(Model& model, ChatRenderer chat) {
  impl_->chat = std::move(chat);
  impl_->metrics.kv_size = model.n_ctx();
  SchedulerOptions so;
  so.max_queue = impl_->opt.max_queue;
  so.parallel = impl_->opt.parallel;
  so.step_tokens = impl_->opt.step_tokens;
  impl_->scheduler = std::make_unique<Scheduler>(model, impl_->metrics, so);
  impl_->loaded = &model;
}

}  // namespace bitnet::server
