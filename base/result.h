#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace podshaper {

// An error that carries its context up: the message says what was wrong and,
// where it can, what to change ("batch-bytes \"12Qi\" is not a quantity").
struct Error {
  std::string message;
};

// A value or an error (an Error, or a type derived from it that says more,
// like kube::ApiError). std::expected needs C++23 and a newer clang than
// Debian's, which the fuzzers use.
template <class T, class E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(E error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit by design

  // A Result with a more specific error converts to one with a general error.
  template <class Specific>
    requires(std::is_base_of_v<E, Specific> && !std::is_same_v<E, Specific>)
  Result(Result<T, Specific> other)  // NOLINT: implicit by design
      : v_(other.ok() ? std::variant<T, E>(std::in_place_index<0>, std::move(other).value())
                      : std::variant<T, E>(std::in_place_index<1>, static_cast<const E&>(other.error()))) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const E& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, E> v_;
};

// Success, or an error: where only success matters (`return {};` on success).
template <class E>
class [[nodiscard]] Result<void, E> {
 public:
  Result() = default;
  Result(E error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  template <class Specific>
    requires(std::is_base_of_v<E, Specific> && !std::is_same_v<E, Specific>)
  Result(Result<void, Specific> other)  // NOLINT: implicit by design
      : error_(other.ok() ? E{} : static_cast<const E&>(other.error())), ok_(other.ok()) {}

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const E& error() const { return error_; }

 private:
  E error_{};
  bool ok_ = true;
};

inline Error makeError(std::string message) { return Error{std::move(message)}; }

}  // namespace podshaper
