#pragma once

// What a fuzz target asserts: a broken invariant prints what broke and aborts,
// which libFuzzer (and the replay runner) reports as a crash with the input.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace podshaper::fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* condition, const std::string& detail) {
  std::fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", file, line, condition);
  if (!detail.empty()) std::fprintf(stderr, "  %s\n", detail.c_str());
  std::fflush(stderr);
  std::abort();
}

// JSON for a message, whatever bytes its strings hold (dump() throws on invalid UTF-8).
inline std::string show(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The fuzz input as text (the targets' inputs are text formats).
inline std::string_view asText(const unsigned char* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace podshaper::fuzz

#define FUZZ_CHECK(condition, detail)                                                    \
  do {                                                                                   \
    if (!(condition)) ::podshaper::fuzz::fail(__FILE__, __LINE__, #condition, (detail)); \
  } while (false)
