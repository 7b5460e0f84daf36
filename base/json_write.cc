#include "base/json_write.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>

#include <simdjson.h>

#include "base/text.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace podshaper {
namespace {

using json = nlohmann::json;

// What each byte becomes inside a string: 0 as it is, 1 a \u00XX escape, else the
// character after the backslash. Bytes from 0x80 are kept (UTF-8, checked once per string).
constexpr std::array<char, 256> kEscapes = [] {
  std::array<char, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = 1;
  t['\b'] = 'b';
  t['\t'] = 't';
  t['\n'] = 'n';
  t['\f'] = 'f';
  t['\r'] = 'r';
  t['"'] = '"';
  t['\\'] = '\\';
  return t;
}();

// Whether any of the eight bytes is a control byte, '"', '\\' or from 0x80: a byte the
// loop below must look at. Exact for the eight as a whole: with the high bits out, a
// borrow starts only at a byte that is itself one of them.
bool needsLook(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  const uint64_t low = word & ~kHigh;  // every byte below 0x80
  const uint64_t control = (low - kOnes * 0x20) & ~low;  // a byte < 0x20 sets its bit 7
  const uint64_t quote = ((low ^ (kOnes * '"')) - kOnes) & ~(low ^ (kOnes * '"'));
  const uint64_t slash = ((low ^ (kOnes * '\\')) - kOnes) & ~(low ^ (kOnes * '\\'));
  return ((control | quote | slash) & kHigh) != 0 || (word & kHigh) != 0;
}

template <typename Integer>
void appendInteger(std::string& out, Integer v) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
  out.append(digits, end);
}

// The index of the first byte from `i` on that is a control byte, '"' or '\\' (or from
// 0x80, which the eight-byte step stops at too), or text.size(): the bytes before it are
// written as they are. A byte from 0x80 passed over is noted in `highBytes`.
std::size_t skipPlain(std::string_view text, std::size_t i, bool& highBytes) {
  for (;;) {
#ifdef __SSE2__
    // Sixteen bytes at a time while none is a control byte, '"' or '\\': most of a pod. A
    // byte from 0x80 (UTF-8: a formula's "×") is kept as it is, noted for the check below.
    while (i + 16 <= text.size()) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
      const __m128i control = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
      const __m128i quote = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
      const __m128i slash = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
      highBytes |= _mm_movemask_epi8(v) != 0;
      if (_mm_movemask_epi8(_mm_or_si128(control, _mm_or_si128(quote, slash))) != 0) break;
      i += 16;
    }
#endif
    // Eight plain bytes at a time (printable ASCII, no quote or backslash).
    while (i + 8 <= text.size()) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, 8);
      if (needsLook(word)) break;
      i += 8;
    }
    if (i == text.size()) return i;
    if (i + 8 > text.size() && text.size() >= 8) {
      // Fewer than eight left: the eight that end the text, those before them plain already.
      uint64_t word;
      std::memcpy(&word, text.data() + text.size() - 8, 8);
      if (!needsLook(word)) return text.size();
    }
    const unsigned char c = static_cast<unsigned char>(text[i]);
    highBytes |= c >= 0x80;
    if (kEscapes[c] != 0) return i;
    ++i;  // a byte from 0x80, or one of the last few
  }
}

// A member's key with the comma before it (unless it is the first) and the colon after:
// one step where the key needs no escape (every key a pod has).
void appendMemberKey(std::string& out, std::string_view key, bool first) {
  bool highBytes = false;
  if (skipPlain(key, 0, highBytes) != key.size() || highBytes) {
    if (!first) out += ',';
    appendJsonString(out, key);
    out += ':';
    return;
  }
  if (first) appendAround(out, "\"", key, "\":");
  else appendAround(out, ",\"", key, "\":");
}

}  // namespace

void appendJsonString(std::string& out, std::string_view text) {
  bool highBytes = false;
  std::size_t i = skipPlain(text, 0, highBytes);
  if (i == text.size()) {
    appendAround(out, "\"", text, "\"");  // nothing to escape (most strings): in one step
  } else {
    out += '"';
    std::size_t run = 0;
    for (; i < text.size(); i = skipPlain(text, i + 1, highBytes)) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      const char escape = kEscapes[c];
      out.append(text.data() + run, i - run);
      run = i + 1;
      out += '\\';
      if (escape != 1) {
        out += escape;
      } else {
        static constexpr char kHex[] = "0123456789abcdef";
        out += "u00";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
    }
    out.append(text.data() + run, text.size() - run);
    out += '"';
  }
  if (highBytes && !simdjson::validate_utf8(text.data(), text.size())) {
    (void)json(std::string(text)).dump();  // throws type_error 316, as dump() would have
  }
}

void appendJson(std::string& out, const json& value) {
  switch (value.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, member] : value.get_ref<const json::object_t&>()) {
        appendMemberKey(out, key, first);
        first = false;
        appendJson(out, member);
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const json& item : value.get_ref<const json::array_t&>()) {
        if (!first) out += ',';
        first = false;
        appendJson(out, item);
      }
      out += ']';
      return;
    }
    case json::value_t::string:
      appendJsonString(out, value.get_ref<const std::string&>());
      return;
    case json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case json::value_t::number_integer:
      appendInteger(out, value.get<int64_t>());
      return;
    case json::value_t::number_unsigned:
      appendInteger(out, value.get<uint64_t>());
      return;
    case json::value_t::null:
      out += "null";
      return;
    default:  // floats (nlohmann's shortest form), binary, discarded: as dump() writes them
      out += value.dump();
      return;
  }
}

}  // namespace podshaper
