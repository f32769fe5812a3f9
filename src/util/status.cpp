// Status / StatusOr construction and formatting; see status.h.
#include "util/status.h"

namespace skipkv {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kCorruptData: return "corrupt data";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  Status s(code_, context + ": " + message_);
  s.field_ = field_;
  return s;
}

Status Status::WithField(std::string field) const {
  if (ok()) return *this;
  Status s = *this;
  s.field_ = std::move(field);
  return s;
}

}  // namespace skipkv
