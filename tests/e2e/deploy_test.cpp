// docs/deploy.md, for real: two `bitnet serve` replicas behind Debian's nginx on loopback,
// least-connections, SSE unbuffered; completions streamed through nginx, and both replicas
// served some.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

extern char** environ;

namespace bitnet {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A child process, killed (SIGTERM, then SIGKILL) and reaped when this goes out of scope.
class Child {
 public:
  explicit Child(std::vector<std::string> argv, const fs::path& log) {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 50; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

bool wait_healthy(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(1, 0);
  for (int i = 0; i < 300; ++i) {
    auto r = c.Get("/health");
    if (r && r->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

int64_t requests_served(int port) {
  httplib::Client c("127.0.0.1", port);
  auto m = c.Get("/metrics");
  if (!m) return -1;
  const std::string key = "\nbitnet_requests_total ";
  const size_t at = m->body.find(key);
  return at == std::string::npos ? -1 : std::stoll(m->body.substr(at + key.size()));
}

TEST(Deploy, TwoReplicasBehindNginxStreamCompletions) {
  const char* nginx = "/usr/sbin/nginx";
  if (::access(nginx, X_OK) != 0) GTEST_SKIP() << "no " << nginx << " (Debian package nginx)";
  const fs::path dir = fs::temp_directory_path() / ("bitnet-deploy-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string model = (fs::path(BITNET_SOURCE_DIR) / "models/tiny-stories-b158.gguf").string();
  const int p1 = free_port(), p2 = free_port(), front = free_port();
  {
    Child a({BITNET_CLI_PATH, "serve", "-m", model, "--port", std::to_string(p1), "-t", "1", "-c", "1024"}, dir / "a.log");
    Child b({BITNET_CLI_PATH, "serve", "-m", model, "--port", std::to_string(p2), "-t", "1", "-c", "1024"}, dir / "b.log");
    ASSERT_TRUE(a.started() && b.started());
    std::ofstream(dir / "nginx.conf") << "daemon off;\nmaster_process off;\npid " << (dir / "nginx.pid").string()
                                      << ";\nerror_log " << (dir / "error.log").string() << " warn;\n"
                                      << "events { worker_connections 64; }\nhttp {\n  access_log off;\n"
                                      << "  client_body_temp_path " << dir.string() << "/body;\n"
                                      << "  proxy_temp_path " << dir.string() << "/proxy;\n"
                                      << "  fastcgi_temp_path " << dir.string() << "/fcgi;\n"
                                      << "  uwsgi_temp_path " << dir.string() << "/uwsgi;\n"
                                      << "  scgi_temp_path " << dir.string() << "/scgi;\n"
                                      << "  upstream bitnet { least_conn; server 127.0.0.1:" << p1
                                      << "; server 127.0.0.1:" << p2 << "; keepalive 16; }\n"
                                      << "  server {\n    listen 127.0.0.1:" << front << ";\n"
                                      << "    location / {\n      proxy_pass http://bitnet;\n"
                                      << "      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n"
                                      << "      proxy_buffering off;\n      proxy_read_timeout 600s;\n"
                                      << "      proxy_next_upstream error timeout http_503;\n    }\n  }\n}\n";
    Child proxy({nginx, "-p", dir.string(), "-c", (dir / "nginx.conf").string()}, dir / "nginx.log");
    ASSERT_TRUE(proxy.started());
    ASSERT_TRUE(wait_healthy(p1) && wait_healthy(p2)) << "replicas did not come up";
    ASSERT_TRUE(wait_healthy(front)) << "nginx did not come up";

    // Concurrent streams through nginx: least_conn sends them to both replicas.
    std::vector<std::string> bodies(6);
    std::vector<std::thread> clients;
    for (size_t i = 0; i < bodies.size(); ++i) {
      clients.emplace_back([&, i] {
        httplib::Client c("127.0.0.1", front);
        c.set_read_timeout(120, 0);
        const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 48}, {"temperature", 0}, {"stream", true}};
        auto r = c.Post("/v1/completions", req.dump(), "application/json");
        if (r && r->status == 200) bodies[i] = r->body;
      });
    }
    for (auto& t : clients) t.join();
    std::string first_text;
    for (const std::string& body : bodies) {
      ASSERT_FALSE(body.empty());
      EXPECT_NE(body.find("data: [DONE]\n\n"), std::string::npos);
      std::string text;
      for (size_t p = 0; (p = body.find("data: {", p)) != std::string::npos; ++p) {
        const size_t e = body.find("\n\n", p);
        const json j = json::parse(body.substr(p + 6, e - p - 6));
        text += j["choices"][0]["text"].get<std::string>();
      }
      if (first_text.empty()) first_text = text;
      EXPECT_EQ(text, first_text);  // greedy: the same text from either replica
    }
    EXPECT_FALSE(first_text.empty());
    EXPECT_GE(requests_served(p1), 1);
    EXPECT_GE(requests_served(p2), 1);
    EXPECT_EQ(requests_served(p1) + requests_served(p2), 6);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// A real chat model through bitnet serve: SmolLM2's own template (from its GGUF) renders the
// messages, and greedy decoding gives llama.cpp's answer (../shared/golden/README.md).
TEST(ServeE2e, SmolLm2ChatCompletionAnswersParis) {
  const fs::path model = fs::path(BITNET_SHARED_DIR) / "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << "missing test data: " << model;
  const fs::path dir = fs::temp_directory_path() / ("bitnet-serve-e2e-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const int port = free_port();
  {
    Child server({BITNET_CLI_PATH, "serve", "-m", model.string(), "--port", std::to_string(port), "-c", "2048"},
                 dir / "serve.log");
    ASSERT_TRUE(server.started());
    ASSERT_TRUE(wait_healthy(port)) << "the server did not come up";
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    const json req = {{"messages", json::array({{{"role", "system"}, {"content", "You are a helpful AI assistant named SmolLM, trained by Hugging Face"}},
                                                {{"role", "user"}, {"content", "What is the capital of France? Answer in one sentence."}}})},
                      {"temperature", 0},
                      {"max_tokens", 32}};
    auto r = c.Post("/v1/chat/completions", req.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    EXPECT_EQ(j["choices"][0]["message"]["content"], "The capital of France is Paris.");
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    // The prompt: llama.cpp fed 42 tokens for this conversation (smollm2-chat.logits.txt).
    EXPECT_EQ(j["usage"]["prompt_tokens"], 42);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace bitnet
