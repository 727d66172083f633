#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <thread>

#include "bitnet/chat.h"
#include "commands.h"
#include "server/http_server.h"

namespace bitnet::cli {

namespace {

struct ServeFlags {
  ModelFlags model;
  server::ServerOptions server;
  std::string alias;
  std::string chat_template;  // a built-in name; empty: the model's
};

std::atomic<server::HttpServer*> g_server{nullptr};

void on_signal(int) {
  if (server::HttpServer* s = g_server.load()) s->stop();
}

int run(ServeFlags f) {
  if (f.server.api_key.empty()) {
    if (const char* key = std::getenv("BITNET_API_KEY")) f.server.api_key = key;
  }
  f.server.model_id = !f.alias.empty() ? f.alias : std::filesystem::path(f.model.model).filename().string();
  std::unique_ptr<Model> model;  // declared first: destroyed after the server's worker stops
  server::HttpServer http(f.server);
  auto port = http.bind();
  if (!port.ok()) return fail(port.status());
  g_server = &http;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::fprintf(stderr, "listening on http://%s:%d (GET /health answers 503 until the model is loaded)\n",
               f.server.host.c_str(), *port);
  std::thread listener([&] { http.run(); });
  int code = 0;
  model = load_model(f.model, code);
  if (!model) {
    http.stop();
    listener.join();
    g_server = nullptr;
    return code;
  }
  // The chat endpoint renders messages with the model's template (or the built-in named);
  // without one it answers 400.
  server::ChatRenderer chat;
  auto tmpl = chat::ChatTemplate::for_model(model->chat_template(), f.chat_template, model->summary().architecture);
  if (tmpl.ok()) {
    chat.takes_tools = tmpl->uses_tools();
    std::fprintf(stderr, "chat template: %s%s\n", tmpl->name().c_str(), chat.takes_tools ? " (tools)" : "");
    chat.render = [t = std::move(tmpl).value(), bos = model->bos_token(), eos = model->eos_token()](
                      const std::vector<server::ChatMessage>& messages, const std::string& tools_json) -> Result<std::string> {
      std::vector<chat::Message> m;
      m.reserve(messages.size());
      for (const server::ChatMessage& x : messages) m.push_back({x.role, x.content, x.tool_calls_json, x.tool_call_id});
      return t.render(m, {true, bos, eos, tools_json});
    };
  } else {
    std::fprintf(stderr, "warning: no chat template, /v1/chat/completions answers 400: %s\n", tmpl.status().to_string().c_str());
  }
  http.set_model(*model, std::move(chat));
  std::fprintf(stderr, "model loaded: serving %s\n", f.server.model_id.c_str());
  listener.join();
  g_server = nullptr;
  std::fprintf(stderr, "stopped\n");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, Runner& runner) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /health, /metrics, ...)");
  add_model_flags(*cmd, flags->model);
  // For the server -c is the KV pool all requests share; it writes no receipt.
  cmd->get_option("-c")->description("KV cache positions shared by all requests (blocks of 16); 0 = the model's context (default: 0) [0, 1048576]");
  cmd->remove_option(cmd->get_option("--receipt"));
  server::ServerOptions& s = flags->server;
  cmd->add_option("--host", s.host, "address to listen on (default: 127.0.0.1; 0.0.0.0 exposes the server to the network)");
  add_number(*cmd, "--port", s.port, 0, 65535, "port; 0 = any free port (default: 8080)");
  cmd->add_option("--api-key", s.api_key, "require 'Authorization: Bearer KEY' (default: $BITNET_API_KEY, else none)");
  cmd->add_option("--cors", s.cors_origin, "allow cross-origin requests from this origin (default: CORS off)");
  cmd->add_option("--alias", flags->alias, "model id in responses and /v1/models (default: the file name)");
  const std::vector<std::string> names = chat::builtin_names();
  cmd->add_option("--chat-template", flags->chat_template,
                  "render chat requests with this built-in template instead of the model's (default: the model's)")
      ->check(CLI::IsMember(names));
  add_number(*cmd, "--parallel", s.parallel, size_t{1}, size_t{256}, "requests decoded together (continuous batching; default: 4)");
  add_number(*cmd, "--max-queue", s.max_queue, size_t{1}, size_t{4096}, "requests that may wait; more get 503 + Retry-After (default: 16)");
  add_number(*cmd, "--timeout", s.read_timeout_s, 1, 3600, "read/write timeout per connection in seconds (default: 30)");
  add_number(*cmd, "--max-tokens", s.limits.max_tokens, int64_t{1}, kMaxTokens, "largest max_tokens a request may ask (default: 4096)");
  cmd->callback([flags, &runner] {
    flags->server.write_timeout_s = flags->server.read_timeout_s;
    flags->model.kv_block = 16;  // a paged KV cache shared by the requests; -c is the whole pool
    flags->server.step_tokens = flags->model.n_batch;
    runner = [flags] { return run(*flags); };
  });
}

}  // namespace bitnet::cli
