#include "base/json_parse.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace podshaper {
namespace {

using nlohmann::json;

std::string nested(int levels, char open, char close) {
  std::string text;
  for (int i = 0; i < levels; ++i) text += open == '{' ? std::string("{\"a\":") : std::string(1, open);
  text += open == '{' ? "1" : "";
  for (int i = 0; i < levels; ++i) text += close;
  return text;
}

// What nlohmann's parser reads, a JsonReader reads the same, value and type.
TEST(JsonReader, ReadsWhatNlohmannReads) {
  JsonReader reader;
  for (const char* text :
       {R"({"kind":"AdmissionReview","request":{"uid":"u","object":{"spec":{"containers":[{"name":"c"}]}}}})",
        R"([1, -2, 3.5, 1e3, 18446744073709551615, -9223372036854775808, true, false, null])",
        R"("\u00e9\u0000\ud83d\ude00 \"quoted\" \\ \/")", R"({"a":1,"a":2})", " { } ", "[]", "0", "\"\"",
        R"({"z":1,"a":{"y":[{}],"b":[]}})", "18446744073709551616", "1.5e308"}) {
    SCOPED_TRACE(text);
    auto fast = reader.read(text, 128);
    ASSERT_TRUE(fast.ok()) << fast.error().message;
    const json slow = json::parse(text);
    EXPECT_EQ(*fast, slow);
    EXPECT_EQ(fast->dump(), slow.dump());
    std::function<void(const json&, const json&)> sameTypes = [&](const json& a, const json& b) {
      EXPECT_EQ(a.type(), b.type()) << a.dump();
      if (a.is_structured()) {
        auto ib = b.begin();
        for (auto ia = a.begin(); ia != a.end(); ++ia, ++ib) sameTypes(*ia, *ib);
      }
    };
    sameTypes(*fast, slow);
  }
}

// Read into a tree that held anything before, JsonReader::into gives what nlohmann reads:
// every pair of texts, one read after the other into the same tree, value and type.
TEST(JsonReaderInto, ReadsWhatNlohmannReadsWhateverTheTreeHeld) {
  JsonReader reader;
  const std::vector<std::string> texts = {
      R"({"kind":"AdmissionReview","request":{"uid":"u","object":{"spec":{"containers":[{"name":"c"}]}}}})",
      R"({"kind":"AdmissionReview","request":{"object":{"spec":{"containers":[{"name":"d","env":[]}],"x":1}},"uid":"v"}})",
      R"({"a":1,"a":2})", R"({"a":1,"b":2})", R"({"b":{"c":1},"a":[1,2,3]})", R"({"a":{"c":1},"b":[1]})",
      R"({"a":"a string longer than fifteen bytes","b":-1,"c":18446744073709551615})", R"({"a":2,"a":{"x":"y"}})",
      R"({"z":{"z":{"z":{}}},"y":null})", R"({})", R"([{"a":1},{"b":2},{"a":3,"b":4}])", R"([])",
      R"(["s",1,-1,1.5,true,null,{},[]])", "\"text\"", "7", "null", R"({"a":1,"b":2,"c":3})", R"({"c":3,"b":2,"a":1})",
      R"({"a":1,"b":2,"c":3,"b":4})",
      // Keys in order passing members the text lacks: a few, more than a few (a search),
      // and one passed that comes again out of order.
      R"({"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7})", R"({"b":1,"d":2,"f":3})", R"({"a":0,"g":9})",
      R"({"a":0,"d":9,"b":8})"};
  for (const std::string& before : texts) {
    for (const std::string& after : texts) {
      SCOPED_TRACE(before + " then " + after);
      json tree;
      ASSERT_TRUE(reader.into(tree, before, 128).ok());
      if (tree.is_object()) tree["added by the reader"] = {{"k", "v"}};  // what shaping adds
      ASSERT_TRUE(reader.into(tree, after, 128).ok());
      const json slow = json::parse(after);
      EXPECT_EQ(tree, slow);
      EXPECT_EQ(tree.dump(), slow.dump());
    }
  }
}

// A text it refuses leaves the tree null, whatever it held; one past simdjson's size is
// read by nlohmann into the same tree.
TEST(JsonReaderInto, ARefusedTextLeavesNothing) {
  JsonReader reader;
  json tree = {{"a", 1}};
  auto refused = reader.into(tree, "{\"kind\":", 128);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("not valid JSON at byte"), std::string::npos);
  EXPECT_TRUE(tree.is_null());
  const std::string large = "[\"" + std::string(70 * 1024, 'x') + "\"]";
  ASSERT_TRUE(reader.into(tree, large, 128).ok());
  EXPECT_EQ(tree, json::parse(large));
  ASSERT_TRUE(reader.into(tree, R"({"b":2})", 128).ok());
  EXPECT_EQ(tree, json::parse(R"({"b":2})"));
}

TEST(JsonReader, RefusesWhatNlohmannRefusesWithTheByte) {
  JsonReader reader;
  for (const char* text : {"", "{\"kind\":", "[1,2] x", "\"\xff\"", "{'a':1}", "[1,]", "nul"}) {
    SCOPED_TRACE(text);
    auto r = reader.read(text, 128);
    ASSERT_FALSE(r.ok());
    EXPECT_FALSE(r.error().tooDeep);
    EXPECT_NE(r.error().message.find("not valid JSON at byte"), std::string::npos) << r.error().message;
  }
  auto huge = reader.read("1e400", 128);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().message, "not valid JSON: a number out of range");
}

// The depth limit is nestedDeeperThan's, for arrays and objects, at the edge.
TEST(JsonReader, DepthAtTheEdge) {
  JsonReader reader;
  for (char open : {'[', '{'}) {
    const char close = open == '[' ? ']' : '}';
    EXPECT_TRUE(reader.read(nested(128, open, close), 128).ok());
    auto deeper = reader.read(nested(129, open, close), 128);
    ASSERT_FALSE(deeper.ok());
    EXPECT_TRUE(deeper.error().tooDeep);
    EXPECT_EQ(deeper.error().message, "nested deeper than 128");
    // A limit met on the reader's parser does not stay for the next text.
    EXPECT_TRUE(reader.read(nested(500, open, close), 1000).ok());
    EXPECT_FALSE(reader.read(nested(129, open, close), 128).ok());
  }
  // The smallest limits: at 0 only a scalar (simdjson alone took "[]" there).
  EXPECT_TRUE(reader.read("[]", 1).ok());
  EXPECT_TRUE(reader.read("[[]]", 1).error().tooDeep);
  EXPECT_TRUE(reader.read("7", 0).ok());
  EXPECT_TRUE(reader.read("[]", 0).error().tooDeep);
  EXPECT_TRUE(reader.read("{}", 0).error().tooDeep);
  // nlohmann's parser ends the text at a NUL outside a string; its depth ends there too.
  using namespace std::string_view_literals;
  auto cut = reader.read("{\"a\":[1]}\0[[[[[["sv, 2);
  ASSERT_TRUE(cut.ok()) << cut.error().message;
  EXPECT_EQ(*cut, json::parse(R"({"a":[1]})"));
  EXPECT_TRUE(reader.read("[[[\"\0\"]]]"sv, 2).error().tooDeep);  // a NUL in a string ends nothing
  // Deep and not JSON either: the depth is what is said.
  EXPECT_TRUE(reader.read(std::string(20000, '['), 1000).error().tooDeep);
}

// A text past 64 KiB is read by nlohmann's parser: the same tree, the same limits.
TEST(JsonReader, LargeTexts) {
  JsonReader reader;
  json big = json::object();
  for (int i = 0; i < 20000; ++i) big["key-" + std::to_string(i)] = std::string(20, 'x');
  const std::string text = big.dump();
  ASSERT_GT(text.size(), 64u * 1024);
  auto r = reader.read(text, 128);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, big);
  EXPECT_TRUE(reader.read("{\"small\":1}", 128).ok());  // the reused parser still serves
  const std::string deepAndLarge = std::string(129, '[') + '"' + std::string(70000, 'x') + '"' + std::string(129, ']');
  auto deep = reader.read(deepAndLarge, 128);
  ASSERT_FALSE(deep.ok());
  EXPECT_TRUE(deep.error().tooDeep);
  EXPECT_FALSE(reader.read(text.substr(0, text.size() - 1), 128).ok());
}

}  // namespace
// checkJson says what a JsonReader would, building no tree.
TEST(CheckJson, SaysWhatAReaderSays) {
  JsonReader reader;
  using namespace std::string_view_literals;
  for (std::string_view text : {R"({"a":[1,2,{"b":null}]})"sv, "[1e400]"sv, R"({"a":)"sv, "[[[1]]]"sv, ""sv,
                                "\xEF\xBB\xBF[1]"sv, "[1]\0[[[[[["sv, "[\"\x01\"]"sv, "-0"sv}) {
    auto parsed = reader.read(text, 2);
    auto checked = checkJson(text, 2);
    EXPECT_EQ(checked.ok(), parsed.ok()) << text;
    if (!parsed.ok() && !checked.ok()) {
      EXPECT_EQ(checked.error().message, parsed.error().message) << text;
      EXPECT_EQ(checked.error().tooDeep, parsed.error().tooDeep) << text;
    }
  }
  EXPECT_EQ(checkJson("[1e400]", 2).error().message, "not valid JSON: a number out of range");
  EXPECT_TRUE(checkJson("[[[1]]]", 2).error().tooDeep);
}

}  // namespace podshaper
