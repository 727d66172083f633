// Numeric flags with an allowed range. The text is parsed here with std::from_chars rather than
// by CLI11, whose conversion errors do not name the range and whose CLI::Range prints limits
// such as "0.000000 to 1797...". Bad values are flag errors (exit 2), one line each:
//   error: -n/--n-predict must be an integer in [-1, 1048576], got '-5'
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <type_traits>

#include "commands.h"

namespace bitnet::cli {

namespace {

// "-n,--n-predict" -> "-n/--n-predict"
std::string flag_label(std::string names) {
  std::replace(names.begin(), names.end(), ',', '/');
  return names;
}

template <typename T>
T parse_in_range(const std::string& label, const std::string& text, T lo, T hi) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc() && ptr == end && v >= lo && v <= hi) return v;  // false for NaN
  const std::string shown = text.size() > 24 ? text.substr(0, 24) + "..." : text;
  throw CLI::ValidationError(fmt::format("{} must be {} in [{}, {}], got '{}'", label,
                                         std::is_integral_v<T> ? "an integer" : "a number", lo, hi, shown));
}

template <typename T>
std::string help_with_range(const std::string& help, T lo, T hi) {
  return fmt::format("{} [{}, {}]", help, lo, hi);
}

template <typename T>
const char* type_name() {
  return std::is_integral_v<T> ? "INT" : "FLOAT";
}

}  // namespace

template <typename T>
CLI::Option* add_number(CLI::App& cmd, const std::string& names, T& value, T lo, T hi, const std::string& help) {
  const std::string label = flag_label(names);
  auto parse = [&value, label, lo, hi](const std::string& text) { value = parse_in_range(label, text, lo, hi); };
  return cmd.add_option_function<std::string>(names, parse, help_with_range(help, lo, hi))->type_name(type_name<T>());
}

template <typename T>
CLI::Option* add_number_list(CLI::App& cmd, const std::string& names, std::vector<T>& values, T lo, T hi,
                             const std::string& help) {
  const std::string label = flag_label(names);
  auto parse = [&values, label, lo, hi](const std::vector<std::string>& items) {
    values.clear();
    for (const std::string& text : items) values.push_back(parse_in_range(label, text, lo, hi));
  };
  return cmd.add_option_function<std::vector<std::string>>(names, parse, help_with_range(help, lo, hi))
      ->delimiter(',')
      ->type_name(type_name<T>());
}

template CLI::Option* add_number(CLI::App&, const std::string&, int32_t&, int32_t, int32_t, const std::string&);
template CLI::Option* add_number(CLI::App&, const std::string&, int64_t&, int64_t, int64_t, const std::string&);
template CLI::Option* add_number(CLI::App&, const std::string&, uint64_t&, uint64_t, uint64_t, const std::string&);
template CLI::Option* add_number(CLI::App&, const std::string&, float&, float, float, const std::string&);
template CLI::Option* add_number_list(CLI::App&, const std::string&, std::vector<int32_t>&, int32_t, int32_t,
                                      const std::string&);

}  // namespace bitnet::cli
