// Status and Result: how errors caused by user input travel through fusionopt.
//
// Internal invariants use FUSIONOPT_CHECK (an assertion that aborts with a message);
// anything a user can cause with a bad model or flag is a Status with context, so the CLI
// can print one line and exit with the documented code.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace fusionopt {

// Exit codes are part of the CLI contract (README "Exit codes"); keep them stable.
enum class ErrorCode : int {
  kOk = 0,
  kInvalidModel = 1,  // the model is malformed or violates the ONNX spec
  kUsage = 2,         // bad command line
  kIo = 3,            // file cannot be read or written
  kUnsupported = 4,   // valid model, but uses something fusionopt cannot handle
  kMismatch = 5,      // verification found different outputs
  kInternal = 70,     // a bug in fusionopt
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with where the problem was found: "node 'x': <message>".
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidModel(std::string message) {
  return Status(ErrorCode::kInvalidModel, std::move(message));
}
inline Status IoError(std::string message) { return Status(ErrorCode::kIo, std::move(message)); }
inline Status Unsupported(std::string message) {
  return Status(ErrorCode::kUnsupported, std::move(message));
}
inline Status UsageError(std::string message) {
  return Status(ErrorCode::kUsage, std::move(message));
}
// A broken invariant found by a check that reports rather than aborts (the IR verifier), so
// the caller can name the pass responsible.
inline Status InternalError(std::string message) {
  return Status(ErrorCode::kInternal, std::move(message));
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : state_(std::move(status)) {
    if (std::get<Status>(state_).ok()) std::abort();  // an ok Status carries no value
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(state_);
  }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> state_;
};

[[noreturn]] inline void CheckFailed(const char* condition, const char* file, int line,
                                     const std::string& message) {
  std::fprintf(stderr, "fusionopt internal error: %s:%d: check '%s' failed: %s\n", file, line,
               condition, message.c_str());
  std::abort();
}

}  // namespace fusionopt

#define FUSIONOPT_CHECK(cond, msg)                                         \
  do {                                                                     \
    if (!(cond)) ::fusionopt::CheckFailed(#cond, __FILE__, __LINE__, msg); \
  } while (0)

#define FUSIONOPT_RETURN_IF_ERROR(expr)   \
  do {                                    \
    ::fusionopt::Status status_ = (expr); \
    if (!status_.ok()) return status_;    \
  } while (0)

#define FUSIONOPT_CONCAT_INNER(a, b) a##b
#define FUSIONOPT_CONCAT(a, b) FUSIONOPT_CONCAT_INNER(a, b)
#define FUSIONOPT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()
#define FUSIONOPT_ASSIGN_OR_RETURN(lhs, expr) \
  FUSIONOPT_ASSIGN_OR_RETURN_IMPL(FUSIONOPT_CONCAT(result_, __LINE__), lhs, expr)
