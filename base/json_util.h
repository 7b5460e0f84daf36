#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace podshaper {

namespace detail {
// The sign of the comparison of two words of bytes as memcmp compares them: the first byte
// that differs decides, so they are compared big-endian.
template <typename Word>
inline int compareWords(Word x, Word y) {
  if constexpr (std::endian::native == std::endian::little) {
    if constexpr (sizeof(Word) == 8) {
      x = __builtin_bswap64(x);
      y = __builtin_bswap64(y);
    } else {
      x = __builtin_bswap32(x);
      y = __builtin_bswap32(y);
    }
  }
  return x < y ? -1 : 1;
}
}  // namespace detail

// a.compare(b)'s sign, without a call to memcmp: an object's keys are short and mostly
// differ early, and the call cost more than the comparison (a pod's admission compared
// keys about 1,300 times through it).
inline int compareKeys(std::string_view a, std::string_view b) {
  const std::size_t n = std::min(a.size(), b.size());
  if (n >= 8) {
    std::size_t i = 0;
    uint64_t x, y;
    for (; i + 8 <= n; i += 8) {
      std::memcpy(&x, a.data() + i, 8);
      std::memcpy(&y, b.data() + i, 8);
      if (x != y) return detail::compareWords(x, y);
    }
    // The last bytes: the eight that end them (those before are equal).
    if (i < n) {
      std::memcpy(&x, a.data() + n - 8, 8);
      std::memcpy(&y, b.data() + n - 8, 8);
      if (x != y) return detail::compareWords(x, y);
    }
  } else if (n >= 4) {  // the first four, then the four that end them
    uint32_t x, y;
    std::memcpy(&x, a.data(), 4);
    std::memcpy(&y, b.data(), 4);
    if (x != y) return detail::compareWords(x, y);
    std::memcpy(&x, a.data() + n - 4, 4);
    std::memcpy(&y, b.data() + n - 4, 4);
    if (x != y) return detail::compareWords(x, y);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[i]) ? -1 : 1;
    }
  }
  return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
}

// A key to find an object's member by (object_t::find(MemberKey{...})): ordered as the
// object's own keys are (std::less<> compares through these), by compareKeys.
struct MemberKey {
  std::string_view text;
};
inline bool operator<(const std::string& a, MemberKey b) { return compareKeys(a, b.text) < 0; }
inline bool operator<(MemberKey a, const std::string& b) { return compareKeys(a.text, b) < 0; }

// The member of an object with that key, or end(): as object.find(key), by compareKeys.
inline nlohmann::json::object_t::const_iterator findMember(const nlohmann::json::object_t& object,
                                                           std::string_view key) {
  return object.find(MemberKey{key});
}
inline nlohmann::json::object_t::iterator findMember(nlohmann::json::object_t& object, std::string_view key) {
  return object.find(MemberKey{key});
}

// object[key] without copying and without inserting: a reference to the member,
// or to a null when `object` is not an object or has no such key. (json::value()
// returns a copy: on a 10 KB pod that is most of an admission's time.)
inline const nlohmann::json& member(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json kNull;
  if (!object.is_object()) return kNull;
  const auto& members = *object.get_ptr<const nlohmann::json::object_t*>();
  auto it = findMember(members, key);
  return it == members.end() ? kNull : it->second;
}

// parent[key] as an array: made an empty one when it is missing or not an array.
inline nlohmann::json& ensureArray(nlohmann::json& parent, std::string_view key) {
  nlohmann::json& a = parent[key];
  if (!a.is_array()) a = nlohmann::json::array();
  return a;
}

// Whether the value is the string `text`. (json == "text" first makes a json of the text:
// an allocation, two for a text past 15 bytes, at every comparison.)
inline bool hasText(const nlohmann::json& value, std::string_view text) {
  return value.is_string() && value.get_ref<const std::string&>() == text;
}

// The member as a string, or "" when it is missing or not a string.
inline std::string stringMember(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json& m = member(object, key);
  return m.is_string() ? m.get<std::string>() : std::string();
}

// The object's metadata.labels (null when it has none).
inline const nlohmann::json& labelsOf(const nlohmann::json& object) {
  return member(member(object, "metadata"), "labels");
}

// The object's annotation, when it has it as a string.
inline std::optional<std::string> annotation(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json& value = member(member(member(object, "metadata"), "annotations"), key);
  if (!value.is_string()) return std::nullopt;
  return value.get<std::string>();
}

// Whether JSON text nests objects and arrays deeper than maxDepth (strings
// skipped), read before parsing: nlohmann's parser is iterative, but copying,
// comparing and dumping a value recurse once per level, and a hand-made body
// nested 20,000 deep overflows the stack. Counted in what nlohmann's parser reads: a
// NUL outside a string ends the text for it (the list page fuzzer found brackets after
// one refused as "nested deeper" in a text it reads whole).
inline bool nestedDeeperThan(std::string_view text, int maxDepth) {
  int depth = 0;
  bool inString = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\') ++i;
      else if (c == '"') inString = false;
    } else if (c == '\0') {
      return false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      if (++depth > maxDepth) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

namespace detail {
inline void putMembers(nlohmann::json::object_t&) {}
template <typename Value, typename... Rest>
void putMembers(nlohmann::json::object_t& members, std::string_view key, Value&& value, Rest&&... rest) {
  members.emplace(std::string(key), std::forward<Value>(value));
  putMembers(members, std::forward<Rest>(rest)...);
}
}  // namespace detail

// jsonObject("name", a, "value", b): the object {"name": a, "value": b}, its members made in
// place. nlohmann's {{"name", a}, {"value", b}} first makes each pair an array and copies
// what it holds (such objects were 4% of an admission).
template <typename... KeysAndValues>
nlohmann::json jsonObject(KeysAndValues&&... keysAndValues) {
  static_assert(sizeof...(KeysAndValues) % 2 == 0, "jsonObject takes keys and values in pairs");
  nlohmann::json object(nlohmann::json::value_t::object);
  detail::putMembers(*object.get_ptr<nlohmann::json::object_t*>(), std::forward<KeysAndValues>(keysAndValues)...);
  return object;
}

}  // namespace podshaper
