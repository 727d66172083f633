// Running the `bitnet` command line from the end-to-end tests (cli_test, chat_cli_test).
#pragma once

#include <filesystem>
#include <string>

namespace bitnet::test {

struct Output {
  int exit_code = -1;  // -1: killed by a signal
  std::string out;
  std::string err;
};

// A folder of this test process's own under the system's temporary folder (made once).
std::filesystem::path cli_temp_dir();
std::string slurp(const std::filesystem::path& p);
// Runs BITNET_CLI_PATH with `args` (shell words) and `input` on stdin, killed after
// timeout_s seconds.
Output run_cli(const std::string& args, const std::string& input = "", int timeout_s = 120);

}  // namespace bitnet::test
