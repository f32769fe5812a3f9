// Status and StatusOr<T>: how file, request and configuration problems travel
// (public API; self-contained: standard library only).
// Contract: a non-OK Status carries a message a user can act on — it names the
// file, field or value at fault and what was expected. Internal invariants use
// SKIPKV_CHECK (src/util/check.h) instead; hot loops never produce a Status.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace skipkv {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad option, bad request, bad configuration
  kNotFound,         // missing file, tensor or key
  kIoError,          // the OS refused (open, mmap, read, write)
  kCorruptData,      // a file's content violates its format
  kUnsupported,      // valid input we do not handle (unknown arch, type)
  kOutOfRange,       // e.g. prompt longer than the context
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corrupt data: model.gguf: tensor 'blk.0.attn_q.weight' ..." — for logs and the CLI.
  std::string ToString() const;
  // Returns a copy whose message is prefixed by `context: ` (the field stays).
  Status WithContext(const std::string& context) const;

  // The input field at fault, when the error is about one: a method
  // parameter's key ("budget", "sim_threshold", "steer_layer"; the keys of
  // skipkv/method_args.h), "method" for the method's name, "prompt" for a
  // request's prompt; empty otherwise. Callers map it to their own spelling
  // (the CLI's --set FIELD, serve's "kv.FIELD") instead of reading the
  // message.
  const std::string& field() const { return field_; }
  // Returns a copy naming `field` (no effect on an OK status).
  Status WithField(std::string field) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string field_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
// InvalidArgument about the input field `field` (see Status::field).
inline Status InvalidField(std::string field, std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m)).WithField(std::move(field));
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status CorruptData(std::string m) { return {StatusCode::kCorruptData, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace skipkv

#define SKIPKV_CONCAT_INNER(a, b) a##b
#define SKIPKV_CONCAT(a, b) SKIPKV_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define SKIPKV_RETURN_IF_ERROR(expr)                   \
  do {                                                 \
    ::skipkv::Status _skipkv_st = (expr);              \
    if (!_skipkv_st.ok()) return _skipkv_st;           \
  } while (0)

// `SKIPKV_ASSIGN_OR_RETURN(auto x, MakeX());` — unwraps a StatusOr or returns its error.
#define SKIPKV_ASSIGN_OR_RETURN(lhs, expr) \
  SKIPKV_ASSIGN_OR_RETURN_IMPL(SKIPKV_CONCAT(_skipkv_so_, __LINE__), lhs, expr)
#define SKIPKV_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
