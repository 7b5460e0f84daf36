#include "api/memlock.h"

#include "api/names.h"
#include "base/quantity.h"

namespace podshaper {
namespace {

// RLIMIT_INFINITY: the ulimit-adjuster parses soft/hard as uint64; "-1" fails
// to parse and the container is not created (containerd/nri adjuster.go).
constexpr std::string_view kRlimInfinity = "18446744073709551615";

}  // namespace

std::string MemlockLimit::text() const {
  return bytes ? std::to_string(*bytes) : std::string(names::kMemlockUnlimited);
}

std::string MemlockLimit::rlimit() const { return bytes ? std::to_string(*bytes) : std::string(kRlimInfinity); }

std::string MemlockLimit::words() const {
  return bytes ? formatBytes(static_cast<int64_t>(*bytes)) : std::string(names::kMemlockUnlimited);
}

Result<MemlockLimit> parseMemlockLimit(std::string_view text) {
  if (text == names::kMemlockUnlimited) return MemlockLimit{};
  auto bytes = parseQuantity(text);
  if (!bytes) {
    return makeError("\"" + std::string(text) + "\" is neither unlimited nor a quantity of bytes (e.g. 4Mi, 64Gi)");
  }
  if (*bytes == 0) return makeError("\"" + std::string(text) + "\" is zero: a locked-memory limit is at least 1 byte");
  return MemlockLimit{static_cast<uint64_t>(*bytes)};
}

}  // namespace podshaper
