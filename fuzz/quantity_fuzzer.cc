// Kubernetes quantities and strict counts (base/quantity.h): annotation values,
// resource limits and config settings all go through these.
//   parseQuantity: a value is non-negative; formatBytes() of it parses back to
//   itself; "<value>" and "<value>k"/"<value>Ki" agree with it where they fit.
//   parseCount: accepts digits only, and the number prints back to the digits
//   (less leading zeros); a count that fits int64 is the same as a quantity.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "base/quantity.h"
#include "fuzz/fuzz_check.h"

using podshaper::formatBytes;
using podshaper::parseCount;
using podshaper::parseQuantity;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

void checkQuantity(std::string_view text) {
  auto q = parseQuantity(text);
  if (!q) {
    FUZZ_CHECK(!q.error().message.empty(), std::string(text));
    return;
  }
  const int64_t v = *q;
  FUZZ_CHECK(v >= 0, std::string(text));
  const std::string formatted = formatBytes(v);
  auto back = parseQuantity(formatted);
  FUZZ_CHECK(back.ok() && *back == v, std::string(text) + " -> " + std::to_string(v) + " -> " + formatted);
  const std::string digits = std::to_string(v);
  auto plain = parseQuantity(digits);
  FUZZ_CHECK(plain.ok() && *plain == v, digits);
  if (v <= kMax / 1024) {
    auto ki = parseQuantity(digits + "Ki");
    FUZZ_CHECK(ki.ok() && *ki == v * 1024, digits + "Ki");
  }
  if (v <= kMax / 1000) {
    auto k = parseQuantity(digits + "k");
    FUZZ_CHECK(k.ok() && *k == v * 1000, digits + "k");
    auto milli = parseQuantity(digits + "000m");
    FUZZ_CHECK(milli.ok() && *milli == v, digits + "000m");
  }
}

void checkCount(std::string_view text) {
  auto c = parseCount(text);
  if (!c) {
    FUZZ_CHECK(!c.error().message.empty(), std::string(text));
    return;
  }
  FUZZ_CHECK(!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos, std::string(text));
  std::string_view significant = text.substr(std::min(text.find_first_not_of('0'), text.size() - 1));
  FUZZ_CHECK(std::to_string(*c) == significant, std::string(text) + " -> " + std::to_string(*c));
  if (*c <= static_cast<uint64_t>(kMax)) {
    auto q = parseQuantity(text);
    FUZZ_CHECK(q.ok() && static_cast<uint64_t>(*q) == *c, std::string(text));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = podshaper::fuzz::asText(data, size);
  checkQuantity(text);
  checkCount(text);
  return 0;
}
