#include "base/quantity.h"

#include "base/text.h"

#include <array>
#include <cstddef>
#include <limits>
#include <optional>
#include <utility>

namespace podshaper {
namespace {

std::string quoted(std::string_view text) { return inQuotes(text, 64); }

__extension__ typedef unsigned __int128 u128;

struct Suffix {
  std::string_view text;
  int pow2;   // multiplier 2^pow2
  int pow10;  // multiplier 10^pow10
};

constexpr std::array<Suffix, 14> kSuffixes{{
    {"Ki", 10, 0}, {"Mi", 20, 0}, {"Gi", 30, 0}, {"Ti", 40, 0}, {"Pi", 50, 0}, {"Ei", 60, 0},
    {"n", 0, -9},  {"u", 0, -6},  {"m", 0, -3},  {"k", 0, 3},   {"M", 0, 6},   {"G", 0, 9},
    {"T", 0, 12},  {"P", 0, 15},
}};

bool isDigit(char c) { return c >= '0' && c <= '9'; }

std::optional<u128> mul128(u128 a, u128 b) {
  u128 r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<u128> pow10(int n) {
  u128 r = 1;
  for (int i = 0; i < n; ++i) {
    auto next = mul128(r, 10);
    if (!next) return std::nullopt;
    r = *next;
  }
  return r;
}

Error notAQuantity(std::string_view text, std::string_view why) {
  return makeError(quoted(text) + " is not a quantity (" + std::string(why) +
                   "; examples: 18Mi, 1.5Gi, 19267584)");
}

}  // namespace

Result<int64_t> parseQuantity(std::string_view text) {
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';

  // Mantissa digits without the decimal point; trailing fraction zeros dropped.
  std::string digits;
  int fractionDigits = 0;
  bool sawDigit = false;
  while (i < text.size() && isDigit(text[i])) {
    digits += text[i++];
    sawDigit = true;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && isDigit(text[i])) {
      digits += text[i++];
      ++fractionDigits;
      sawDigit = true;
    }
  }
  if (!sawDigit) return notAQuantity(text, "no number");
  while (fractionDigits > 0 && digits.back() == '0') {
    digits.pop_back();
    --fractionDigits;
  }
  std::size_t firstNonZero = digits.find_first_not_of('0');
  digits = firstNonZero == std::string::npos ? "0" : digits.substr(firstNonZero);
  if (digits.size() > 36) return notAQuantity(text, "too many digits");

  int pow2 = 0;
  int pow10exp = 0;
  std::string_view rest = text.substr(i);
  if (!rest.empty()) {
    bool matched = false;
    for (const auto& s : kSuffixes) {
      if (rest == s.text) {
        pow2 = s.pow2;
        pow10exp = s.pow10;
        matched = true;
        break;
      }
    }
    if (!matched && rest == "E") {
      pow10exp = 18;
      matched = true;
    }
    if (!matched && (rest[0] == 'e' || rest[0] == 'E')) {
      std::string_view e = rest.substr(1);
      bool expNegative = false;
      if (!e.empty() && (e[0] == '+' || e[0] == '-')) {
        expNegative = e[0] == '-';
        e.remove_prefix(1);
      }
      if (e.empty() || e.size() > 3) return notAQuantity(text, "bad exponent");
      int value = 0;
      for (char c : e) {
        if (!isDigit(c)) return notAQuantity(text, "bad exponent");
        value = value * 10 + (c - '0');
      }
      pow10exp = expNegative ? -value : value;
      matched = true;
    }
    if (!matched) return notAQuantity(text, "unknown suffix " + quoted(rest));
  }

  u128 mantissa = 0;
  for (char c : digits) mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
  if (negative && mantissa != 0) return makeError(quoted(text) + " is negative");
  if (mantissa == 0) return int64_t{0};

  auto tooLarge = [&] { return makeError(quoted(text) + " is too large"); };
  auto scaled = mul128(mantissa, u128{1} << pow2);
  if (pow2 >= 127 || !scaled) return tooLarge();
  u128 value = *scaled;
  int exp10 = pow10exp - fractionDigits;
  if (exp10 >= 0) {
    auto p = pow10(exp10);
    if (!p) return tooLarge();
    auto v = mul128(value, *p);
    if (!v) return tooLarge();
    value = *v;
  } else {
    auto p = pow10(-exp10);
    if (!p) {
      value = 1;  // a positive amount far below one unit rounds up to one
    } else {
      value = value / *p + (value % *p != 0 ? 1 : 0);
    }
  }
  if (value > static_cast<u128>(std::numeric_limits<int64_t>::max())) return tooLarge();
  return static_cast<int64_t>(value);
}

std::string formatBytes(int64_t bytes) {
  static constexpr std::array<std::pair<int, std::string_view>, 6> kBinary{
      {{60, "Ei"}, {50, "Pi"}, {40, "Ti"}, {30, "Gi"}, {20, "Mi"}, {10, "Ki"}}};
  if (bytes == 0) return "0";
  for (const auto& [shift, suffix] : kBinary) {
    int64_t unit = int64_t{1} << shift;
    if (bytes % unit == 0) return std::to_string(bytes / unit) + std::string(suffix);
  }
  return std::to_string(bytes);
}

Result<uint64_t> parseCount(std::string_view text) {
  if (text.empty()) return makeError("is empty; expected a non-negative integer");
  if (text[0] == '-') {
    return makeError(quoted(text) + " is negative; expected a non-negative integer");
  }
  uint64_t value = 0;
  for (char c : text) {
    if (!isDigit(c)) {
      return makeError(quoted(text) + " is not a non-negative integer");
    }
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, static_cast<uint64_t>(c - '0'), &value)) {
      return makeError(quoted(text) + " is too large");
    }
  }
  return value;
}

}  // namespace podshaper
