#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace podshaper {

namespace detail {
inline void appendPart(std::string& out, std::string_view text) { out += text; }
// A number of up to 64 bits: no character type (a char is text, not a number) and no bool.
template <typename T>
concept Count = std::is_integral_v<T> && sizeof(T) <= 8 && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
                !std::is_same_v<T, signed char> && !std::is_same_v<T, unsigned char> && !std::is_same_v<T, wchar_t> &&
                !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> && !std::is_same_v<T, char32_t>;
template <Count Integer>
void appendPart(std::string& out, Integer n) {
  char digits[24];
  const char* end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  out.append(digits, static_cast<std::size_t>(end - digits));
}
}  // namespace detail

// `before`, `text` and `after` appended in one step: room made once (filled, then written
// over), where three appends would each check and grow the string. `before` and `after`
// are literals: their copies are of a size known when compiled, a store or two each.
template <std::size_t B, std::size_t A>
void appendAround(std::string& out, const char (&before)[B], std::string_view text, const char (&after)[A]) {
  const std::size_t at = out.size();
  out.append(B - 1 + text.size() + A - 1, '\0');
  char* to = out.data() + at;
  std::memcpy(to, before, B - 1);
  if (!text.empty()) std::memcpy(to + B - 1, text.data(), text.size());
  std::memcpy(to + B - 1 + text.size(), after, A - 1);
}

// Each part appended to `out`: a text, or an integer as std::to_string writes it. A long
// message made of many parts is built in one string, not through a string for each `+`.
template <typename... Parts>
void appendAll(std::string& out, const Parts&... parts) {
  (detail::appendPart(out, parts), ...);
}

// `text` cut to at most `max` bytes, ending in "..." when cut, never inside a UTF-8
// character: for what goes into an Event's message or a line quoted in one.
inline std::string cutUtf8(std::string text, std::size_t max) {
  if (text.size() <= max) return text;
  text.resize(max >= 3 ? max - 3 : 0);
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
  return text + "...";
}

// What a user wrote, in a message: quoted, at most `max` bytes of it (cutUtf8).
inline std::string inQuotes(std::string_view text, std::size_t max = 100) {
  return "\"" + cutUtf8(std::string(text), max) + "\"";
}

// `items` with `separator` between them: "a, b, c".
inline std::string joined(const std::vector<std::string>& items, std::string_view separator = ", ") {
  std::string out;
  for (const std::string& item : items) {
    if (&item != &items.front()) out += separator;
    out += item;
  }
  return out;
}

// The first `shown` of `items`, each as `words` writes it (only those are written), and
// how many are left: "n1, n2, n3 and 4 more". A message names a few of a long list.
template <typename Items, typename Words>
std::string someOf(const Items& items, std::size_t shown, Words words) {
  std::string out;
  std::size_t written = 0;
  for (const auto& item : items) {
    if (written == shown) break;
    if (written++ > 0) out += ", ";
    out += words(item);
  }
  if (items.size() > shown) appendAll(out, " and ", items.size() - shown, " more");
  return out;
}

inline std::string someOf(const std::vector<std::string>& items, std::size_t shown = 3) {
  return someOf(items, shown, [](const std::string& item) -> const std::string& { return item; });
}

// A container path as the runtime resolves a mount destination: made absolute, then
// cleaned lexically like Go's filepath.Clean ("/dev//shm", "/dev/shm/.", "dev/shm" and
// "/dev/x/../shm" are all "/dev/shm").
inline std::string cleanPath(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    start = end + 1;
  }
  std::string out;
  for (std::string_view part : parts) {
    out += '/';
    out += part;
  }
  return out.empty() ? "/" : out;
}

// A count and its noun, plural unless one: "1 GPU", "8 GPUs", "0 ranks".
inline std::string counted(uint64_t n, std::string_view noun) {
  std::string out;
  appendAll(out, n, " ", noun, n == 1 ? "" : "s");
  return out;
}

}  // namespace podshaper
