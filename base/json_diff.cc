#include "base/json_diff.h"

#include <cstdint>
#include <cstring>

#include "base/text.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

void diffAt(const json& before, const json& after, std::string& path, json& patch) {
  if (before.type() != after.type()) {
    patch.push_back({{"op", "replace"}, {"path", path}, {"value", after}});
    return;
  }
  const std::size_t length = path.size();
  switch (before.type()) {
    case json::value_t::array: {
      std::size_t i = 0;
      for (; i < before.size() && i < after.size(); ++i) {
        if (before[i] == after[i]) continue;
        path += '/';
        path += std::to_string(i);
        diffAt(before[i], after[i], path, patch);
        path.resize(length);
      }
      // What `before` has past `after`'s end, removed from its last (indexes stay valid).
      const std::size_t removalsAt = patch.size();
      for (std::size_t j = i; j < before.size(); ++j) {
        patch.insert(patch.begin() + static_cast<std::ptrdiff_t>(removalsAt),
                     json{{"op", "remove"}, {"path", path + "/" + std::to_string(j)}});
      }
      for (std::size_t j = i; j < after.size(); ++j) {
        patch.push_back({{"op", "add"}, {"path", path + "/-"}, {"value", after[j]}});
      }
      return;
    }
    case json::value_t::object: {
      for (auto it = before.begin(); it != before.end(); ++it) {
        auto there = after.find(it.key());
        if (there != after.end() && *there == it.value()) continue;
        appendPointerToken(path, it.key());
        if (there == after.end()) {
          patch.push_back({{"op", "remove"}, {"path", path}});
        } else {
          diffAt(it.value(), *there, path, patch);
        }
        path.resize(length);
      }
      for (auto it = after.begin(); it != after.end(); ++it) {
        if (before.contains(it.key())) continue;
        appendPointerToken(path, it.key());
        patch.push_back({{"op", "add"}, {"path", path}, {"value", it.value()}});
        path.resize(length);
      }
      return;
    }
    default:
      if (before != after) patch.push_back({{"op", "replace"}, {"path", path}, {"value", after}});
      return;
  }
}

// Whether a byte of the key is '~' or '/', eight bytes a step (a byte equal to one makes a
// zero byte of the word xor that byte repeated): keys are short, and this is fewer
// instructions than two calls of memchr or a loop over each byte.
bool hasTildeOrSlash(std::string_view key) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  auto hasZeroByte = [](uint64_t w) { return ((w - kOnes) & ~w & kHigh) != 0; };
  auto either = [&](uint64_t w) { return hasZeroByte(w ^ (kOnes * '~')) || hasZeroByte(w ^ (kOnes * '/')); };
  const std::size_t n = key.size();
  if (n < 8) {
    for (const char c : key) {
      if (c == '~' || c == '/') return true;
    }
    return false;
  }
  uint64_t w;
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    std::memcpy(&w, key.data() + i, 8);
    if (either(w)) return true;
  }
  std::memcpy(&w, key.data() + n - 8, 8);  // the last bytes, in the eight that end the key
  return either(w);
}

}  // namespace

void appendPointerToken(std::string& pointer, std::string_view key) {
  if (!hasTildeOrSlash(key)) {  // most keys: the '/' and the key in one step
    appendAround(pointer, "/", key, "");
    return;
  }
  pointer += '/';
  // The runs between the two characters a token escapes, each appended whole.
  std::size_t run = 0;
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (key[i] != '~' && key[i] != '/') continue;
    pointer.append(key.data() + run, i - run);
    pointer += key[i] == '~' ? "~0" : "~1";
    run = i + 1;
  }
  pointer.append(key.data() + run, key.size() - run);
}

std::string unescapePointerToken(std::string_view token) {
  std::string key;
  key.reserve(token.size());
  for (std::size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      key += token[++i] == '0' ? '~' : '/';
    } else {
      key += token[i];
    }
  }
  return key;
}

void appendDiff(const json& before, const json& after, const std::string& path, json& patch) {
  if (before == after) return;
  std::string at = path;
  diffAt(before, after, at, patch);
}

}  // namespace podshaper
