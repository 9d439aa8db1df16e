#pragma once
// A tiny expected-style result for low-level helpers: a value or an error
// message. (std::expected is C++23; this is all we need of it.)

#include <string>
#include <utility>
#include <variant>

#include <npc/util/error.hpp>

namespace npc {

struct Failure {
  std::string message;
};

template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : state_(std::move(value)) {}
  Result(Failure failure) : state_(std::move(failure)) {}

  [[nodiscard]] bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  [[nodiscard]] const std::string& error() const { return std::get<1>(state_).message; }

  // The value, or `fallback` when there is none (for "nothing there" that
  // needs no message, such as an unreadable folder of temporary files).
  T value_or(T fallback) && { return ok() ? std::get<0>(std::move(state_)) : std::move(fallback); }

  // The value, or throw an npc::Error carrying the message.
  T value_or_throw(ExitCode code = ExitCode::environment) && {
    if (!ok()) throw Error(error(), code);
    return std::get<0>(std::move(state_));
  }

private:
  std::variant<T, Failure> state_;
};

struct Unit {};
using Status = Result<Unit>;
inline Status ok_status() { return Unit{}; }

inline Failure fail(std::string message) { return Failure{std::move(message)}; }

// Whether `result` succeeded, its value dropped: for a caller that needs only
// that (a replacing write, whose "written" is always true).
template <typename T> Status status_of(const Result<T>& result) {
  if (!result) return fail(result.error());
  return ok_status();
}

} // namespace npc
