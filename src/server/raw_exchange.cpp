#include "server/raw_exchange.h"

#include <algorithm>
#include <cstring>

namespace bitnet::server {
namespace {

// A connection whose input is a string and whose output is appended to another.
class StringStream : public httplib::Stream {
 public:
  StringStream(std::string_view in, std::string& out) : in_(in), out_(out) {}
  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - pos_);
    std::memcpy(ptr, in_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8080;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  bool at_end() const { return pos_ >= in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  std::string& out_;
};

}  // namespace

std::string RawServer::exchange(std::string_view request) {
  // httplib writes a chunked (streamed) body only while it is not "shutting down", which it
  // reads as having no listening socket (svr_sock_ invalid): unbound, it would send the headers
  // of every completion and drop its body, and the generation would run on after the exchange.
  // A server that is not listening gets a placeholder no socket call sees (stop() closes the
  // socket only while listening; bind() replaces it).
  if (!is_running()) {
    socket_t none = INVALID_SOCKET;
    svr_sock_.compare_exchange_strong(none, kNotListening);
  }
  std::string out;
  StringStream stream(request, out);
  // At most as many requests as a keep-alive connection serves; each call reads one.
  for (size_t i = 0; i < keep_alive_max_count_ && !stream.at_end(); ++i) {
    bool closed = false;
    if (!process_request(stream, false, closed, nullptr) || closed) break;
  }
  return out;
}

}  // namespace bitnet::server
