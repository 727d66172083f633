// Runs the fuzz target's body (fuzz_entry.h) over deterministic mutations of real templates,
// so the renderer meets hostile templates under plain ctest too. Errors are expected; a crash,
// a sanitizer report, a failed BITNET_CHECK or a hang is a bug.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "chat/fuzz_entry.h"

namespace bitnet::chat {
namespace {

// Pieces of template syntax to insert: tags, operators, names and costly constructs.
const char* const kTokens[] = {
    "{%", "%}", "{{", "}}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "{%+", "+%}", "(", ")", "[", "]", "{", "}",
    "'", "\"", "\\", "|", "~", "*", "**", "//", "%", "+", "-", ".", ",", ":", "==", "!=", "<", " is ", " not ",
    " in ", " and ", " or ", " if ", " else ", "for x in messages", "endfor", "if true", "endif", "elif false",
    "else", "break", "continue", "set ns = namespace(a=1)", "set ns.a = ns.a ~ ns.a", "range(1000000)",
    "loop.index", "loop.last", "messages[0]", "messages[1:]", "[::-1]", "| tojson(indent=4)", "| trim", "| length",
    "| map(attribute='role')", "| selectattr('role', 'equalto', 'user')", "raise_exception('x')", "'a' * 99999",
    "9223372036854775807", "1e308", "\n", "  ", "\t", "endset", "set x", "generation", "endgeneration",
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string mutate(const std::vector<std::string>& seeds, std::mt19937_64& rng) {
  std::string t = seeds[rng() % seeds.size()];
  const int n_mutations = 1 + static_cast<int>(rng() % 4);
  for (int m = 0; m < n_mutations; ++m) {
    const size_t at = t.empty() ? 0 : rng() % (t.size() + 1);
    switch (rng() % 5) {
      case 0:  // insert a piece of syntax
        t.insert(at, kTokens[rng() % std::size(kTokens)]);
        break;
      case 1:  // delete a range
        t.erase(at, rng() % 16);
        break;
      case 2:  // overwrite a byte
        if (at < t.size()) t[at] = static_cast<char>(rng());
        break;
      case 3: {  // duplicate a range
        const std::string part = t.substr(at, rng() % 64);
        t.insert(rng() % (t.size() + 1), part);
        break;
      }
      default: {  // splice in part of another seed
        const std::string& other = seeds[rng() % seeds.size()];
        const size_t from = other.empty() ? 0 : rng() % other.size();
        t.insert(at, other.substr(from, rng() % 128));
      }
    }
  }
  return t;
}

TEST(ChatTemplateFuzz, MutatedTemplatesNeverCrashOrHang) {
  std::vector<std::string> seeds;
  for (const auto& entry : std::filesystem::directory_iterator(BITNET_CHAT_TESTDATA)) {
    if (entry.path().extension() == ".jinja") seeds.push_back(slurp(entry.path()));
  }
  ASSERT_GE(seeds.size(), 5u);
  seeds.push_back("{% set ns = namespace(s='x') %}{% for i in range(30) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}");
  seeds.push_back("{% for a in messages %}{% for b in messages %}{% for c in range(50) %}{{ a.role ~ b.content ~ c }}{% endfor %}{% endfor %}{% endfor %}");
  std::mt19937_64 rng(20251123);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20000; ++i) {
    const std::string input = mutate(seeds, rng);
    const std::vector<uint8_t> exact(input.begin(), input.end());  // exact-size heap copy for ASan
    chat_template_fuzz_one(exact.data(), exact.size());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 60.0) << "the step limit should bound every render";
}

TEST(ChatTemplateFuzz, RegressionInputs) {
  // Inputs that once found bugs, and edge cases of the lexer and the limits.
  for (const std::string& input : {
           std::string(), std::string("{"), std::string("{{"), std::string("{%"), std::string("{#"), std::string("{{}}"),
           std::string("{%%}"), std::string("{{-}}"), std::string("{%-%}"), std::string("{{'\\"), std::string("{{ '\\u12' }}"),
           std::string("{{ \"\\U0011FFFF\" }}"), std::string("{{ (((( }}"), std::string("{{ ]] }}"),
           std::string("{{ {'a': {'b': 1}} }}"), std::string("{% for %}"), std::string("{% endfor %}"),
           std::string("{% set ns = namespace() %}{% set ns.x = [ns] %}"), std::string("{{ range(-5, 5, -1) | list }}"),
           std::string("{{ range(9223372036854775806, 9223372036854775807, 9223372036854775807) | list }}"),
           std::string("{{ -9223372036854775807 - 1 }}{{ (-9223372036854775807 - 1) // -1 }}"),
           std::string("{{ 2 ** 63 }}{{ (-2) ** 63 }}{{ 0 ** 0 }}{{ 10 ** -2 }}"), std::string("{{ 'x'[9223372036854775807:] }}"),
           std::string("{{ messages[-9223372036854775807 - 1] }}"), std::string("{{ [1][::-9223372036854775807] }}"),
           std::string("\xff\xfe{{ '\xc3' | upper }}{{ '\xe6\x97' | length }}"), std::string(1, '\0'),
       }) {
    const std::vector<uint8_t> exact(input.begin(), input.end());
    chat_template_fuzz_one(exact.data(), exact.size());
  }
}

}  // namespace
}  // namespace bitnet::chat
