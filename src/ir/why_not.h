// Why a rewrite, a fusion or a lowering does not apply: one shape for every such answer in the
// compiler, as XLA answers with one FusionDecision and MLIR with a LogicalResult whose
// notifyMatchFailure carries the reason.
//
//   WhyNot      empty when nothing stands in the way, else the one-line reason a report shows
//               (PassContext::Rejected, --report's "kept" lists). `if (WhyNot why = Check())
//               return why;` passes a refusal on; a function returns `{}` to allow and a string
//               literal to refuse.
//   Decided<T>  the result a check computes on its way (a BatchNorm's per-channel affine, a
//               foldable chain), or the WhyNot that stopped it.
#pragma once

#include <cassert>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace fusionopt {

class [[nodiscard]] WhyNot {
 public:
  WhyNot() = default;  // nothing stands in the way
  WhyNot(std::string reason) : reason_(std::move(reason)) {}
  WhyNot(const char* reason) : reason_(reason) {}

  // True when refused: reads as "if there is a reason why not".
  explicit operator bool() const { return !reason_.empty(); }
  const std::string& reason() const { return reason_; }

  // "prefix: reason" for a refusal (the part of a larger check that refused); nothing otherwise.
  WhyNot Prefixed(std::string_view prefix) const {
    return *this ? WhyNot(std::string(prefix) + ": " + reason_) : WhyNot();
  }

  friend bool operator==(const WhyNot&, const WhyNot&) = default;
  friend std::ostream& operator<<(std::ostream& out, const WhyNot& why) {
    return out << '"' << why.reason_ << '"';
  }

 private:
  std::string reason_;
};

template <typename T>
class [[nodiscard]] Decided {
 public:
  Decided(T value) : state_(std::move(value)) {}
  Decided(WhyNot why) : state_(std::move(why)) { assert(std::get<WhyNot>(state_) && "a refusal has a reason"); }
  // A refusal spelled as its reason, where T is not itself made from text.
  Decided(const char* reason) requires(!std::is_constructible_v<T, const char*>) : Decided(WhyNot(reason)) {}
  Decided(std::string reason) requires(!std::is_constructible_v<T, std::string>) : Decided(WhyNot(std::move(reason))) {}

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& operator*() & { return std::get<T>(state_); }
  const T& operator*() const& { return std::get<T>(state_); }
  T&& operator*() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &std::get<T>(state_); }
  const T* operator->() const { return &std::get<T>(state_); }

  // The refusal; empty for a decided value.
  WhyNot why_not() const { return ok() ? WhyNot() : std::get<WhyNot>(state_); }

 private:
  std::variant<T, WhyNot> state_;
};

}  // namespace fusionopt
