#pragma once

#include <cstddef>
#include <string>

namespace podshaper {

// `text` cut to at most `max` bytes, ending in "..." when cut, never inside a UTF-8
// character: for what goes into an Event's message or a line quoted in one.
inline std::string cutUtf8(std::string text, std::size_t max) {
  if (text.size() <= max) return text;
  text.resize(max >= 3 ? max - 3 : 0);
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
  return text + "...";
}

}  // namespace podshaper
