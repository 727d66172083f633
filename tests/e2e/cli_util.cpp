#include "cli_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/test_temp_dir.h"

namespace bitnet::test {

namespace fs = std::filesystem;

fs::path cli_temp_dir() { return process_temp_dir("bitnet_cli_test_"); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Output run_cli(const std::string& args, const std::string& input, int timeout_s) {
  const fs::path in = cli_temp_dir() / "stdin.txt", out = cli_temp_dir() / "stdout.txt",
                 err = cli_temp_dir() / "stderr.txt";
  std::ofstream(in, std::ios::binary) << input;
  const std::string cmd = "timeout " + std::to_string(timeout_s) + " " + std::string(BITNET_CLI_PATH) + " " + args +
                          " <" + in.string() + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  Output o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = slurp(out);
  o.err = slurp(err);
  return o;
}

}  // namespace bitnet::test
