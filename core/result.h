#pragma once

#include <string>
#include <utility>
#include <variant>

namespace podshaper {

// An error that carries its context up: the message says what was wrong and,
// where it can, what to change ("batch-bytes \"12Qi\" is not a quantity").
struct Error {
  std::string message;
};

// A value or an Error. (std::expected needs C++23 and a newer clang than
// Debian's, which the fuzzers use.)
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}       // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

inline Error makeError(std::string message) { return Error{std::move(message)}; }

}  // namespace podshaper
