// Status and Result<T>: the one error type of the library. Errors carry a code and a message
// with context ("loading model.gguf: tensor blk.0.attn_q.weight: ..."); nothing prints and
// carries on, and the library never exits.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace bitnet {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,  // a caller's value is wrong (flag, prompt, parameter)
  kNotFound,         // a file, key or tensor is missing
  kIoError,          // the OS refused (open, mmap, read, write)
  kCorruptFile,      // a file's bytes contradict themselves or the format
  kUnsupported,      // well-formed but not handled (type, architecture, shape)
  kOutOfRange,       // a limit was reached (context full, too many tokens)
  kOutOfMemory,
  kDeviceLost,       // a device stopped answering (driver reset, lost context)
  kUnavailable,      // a backend or device is not present here (no driver, no device)
  kSuspiciousWeights,  // strict mode: weight statistics out of range (CLI exit code 8)
  kInternal,         // a bug: an invariant of ours does not hold
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "context: message".
  Status with_context(std::string_view context) const;
  // "corrupt file: message" (or "ok").
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status corrupt_file(std::string m) { return {StatusCode::kCorruptFile, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status out_of_memory(std::string m) { return {StatusCode::kOutOfMemory, std::move(m)}; }
inline Status device_lost(std::string m) { return {StatusCode::kDeviceLost, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status suspicious_weights(std::string m) { return {StatusCode::kSuspiciousWeights, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

namespace detail {
// Misuse of Result is a bug in the caller: it stops the process with a message in every build
// type (an assert would vanish in Release and leave std::bad_variant_access or worse).
[[noreturn]] inline void result_misuse(const char* what, const Status& status) {
  std::fprintf(stderr, "bitnet: %s (status: %s)\n", what, status.to_string().c_str());
  std::abort();
}
}  // namespace detail

// A value or the Status that explains why there is none. Reading the value of an error
// Result, or making an error Result from an ok Status, aborts with a message.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                   // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {             // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) detail::result_misuse("Result made from an ok Status", {});
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return checked(), *std::get_if<T>(&v_); }
  const T& value() const& { return checked(), *std::get_if<T>(&v_); }
  T&& value() && { return checked(), std::move(*std::get_if<T>(&v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void checked() const {
    if (!ok()) detail::result_misuse("value() of an error Result", std::get<Status>(v_));
  }

  std::variant<T, Status> v_;
};

}  // namespace bitnet

#define BITNET_CONCAT_INNER(a, b) a##b
#define BITNET_CONCAT(a, b) BITNET_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define BITNET_RETURN_IF_ERROR(expr)              \
  do {                                            \
    ::bitnet::Status bitnet_status_ = (expr);     \
    if (!bitnet_status_.ok()) return bitnet_status_; \
  } while (0)

// `BITNET_ASSIGN_OR_RETURN(auto x, f());` declares x from f()'s value or returns its Status.
#define BITNET_ASSIGN_OR_RETURN(lhs, expr) \
  BITNET_ASSIGN_OR_RETURN_IMPL(BITNET_CONCAT(bitnet_result_, __LINE__), lhs, expr)
#define BITNET_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
