// cpp-httplib's server with its one-request entry point reachable without a socket, so that the
// fuzz target and the tests can push raw request bytes through every route, header parser and
// error handler of `bitnet serve` and read back the exact response bytes.
#pragma once

#include <climits>
#include <string>
#include <string_view>

#include <httplib.h>

namespace bitnet::server {

class RawServer : public httplib::Server {
 public:
  // Serves the requests in `request` (pipelined ones too, as on one keep-alive connection) and
  // returns everything written back; streamed responses are written whole (their content
  // providers run to the end, as over a socket).
  std::string exchange(std::string_view request);

 private:
  static constexpr socket_t kNotListening = INT_MAX;  // not a descriptor this process has
};

}  // namespace bitnet::server
