#include "bitnet/status.h"

namespace bitnet {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kCorruptFile: return "corrupt file";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kOutOfMemory: return "out of memory";
    case StatusCode::kDeviceLost: return "device lost";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kSuspiciousWeights: return "suspicious weights";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return {code_, std::move(m)};
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string s(status_code_name(code_));
  s += ": ";
  s += message_;
  return s;
}

}  // namespace bitnet
