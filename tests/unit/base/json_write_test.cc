#include "base/json_write.h"

#include <gtest/gtest.h>

#include <string>

namespace podshaper {
namespace {

using nlohmann::json;

std::string written(const json& value) {
  std::string out;
  appendJson(out, value);
  return out;
}

// The same bytes as dump(), on what a pod holds: every control character, quotes and
// backslashes, UTF-8, numbers of each kind, nesting.
TEST(JsonWrite, WritesWhatDumpWrites) {
  std::string controls;
  for (int c = 0; c < 0x20; ++c) controls += static_cast<char>(c);
  const json values[] = {
      json::parse(R"({"b": [1, -2, 3.5, 1e300, 0.1, true, false, null], "a": {"": "", "x/y": "\"\\/"}})"),
      controls + "\x7f tail",
      "κόσμε 日本 😀 \u2028",
      json::array(),
      json::object(),
      18446744073709551615ULL,
      INT64_MIN,
      1.0,
      -0.0,
      json::parse(R"([[[{"deep": [{"er": "x"}]}]]])"),
  };
  for (const json& v : values) EXPECT_EQ(written(v), v.dump());
}

// Strings of every length around the sixteen and eight bytes read at a time, with a byte
// to escape (or a UTF-8 one) at every place in them: the same bytes as dump().
TEST(JsonWrite, EscapesAtEveryPlaceOfAString) {
  const std::string specials[] = {"\"", "\\", "\n", std::string(1, '\x01'), std::string(1, '\x1f'), "\x7f", "é",
                                  "→", " ", "!", "#", "[", "]", "~"};
  for (std::size_t length = 0; length <= 40; ++length) {
    for (std::size_t at = 0; at < length; ++at) {
      for (const std::string& special : specials) {
        std::string text(length, 'a');
        text.replace(at, 1, special);
        EXPECT_EQ(written(text), json(text).dump()) << length << " " << at << " " << special;
        // As a key, first and after another (the comma and colon written with it).
        const json keyed = {{text, 1}}, second = {{"", 0}, {text, 1}};
        EXPECT_EQ(written(keyed), keyed.dump()) << length << " " << at << " " << special;
        EXPECT_EQ(written(second), second.dump()) << length << " " << at << " " << special;
        // A second byte to look at after it: the scan goes on past the first.
        const std::string twice = text + "é\n" + text;
        EXPECT_EQ(written(twice), json(twice).dump()) << length << " " << at << " " << special;
      }
    }
  }
}

// A byte that is not UTF-8 at every place of strings around the sixteen and eight bytes
// read at a time, as a value and as a key: refused, as dump() refuses it.
TEST(JsonWrite, RefusesWhatIsNotUtf8AtEveryPlace) {
  for (std::size_t length = 1; length <= 40; ++length) {
    for (std::size_t at = 0; at < length; ++at) {
      for (const char* bad : {"\xff", "\xc3", "\x80"}) {
        std::string text(length, 'a');
        text.replace(at, 1, bad);
        EXPECT_THROW(written(text), json::type_error) << length << " " << at;
        EXPECT_THROW(written(json{{text, 1}}), json::type_error) << length << " " << at;
      }
    }
  }
}

TEST(JsonWrite, RefusesWhatDumpRefuses) {
  const json bad = std::string("ok \xff\xfe not UTF-8");
  EXPECT_THROW((void)bad.dump(), json::type_error);
  EXPECT_THROW(written(bad), json::type_error);
  EXPECT_THROW(written(json{{"k", std::string("\xc3")}}), json::type_error);  // cut in the middle of a character
}

}  // namespace
}  // namespace podshaper
