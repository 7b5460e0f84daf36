#include "base/json_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace podshaper {
namespace {

using nlohmann::json;

// jsonObject makes what nlohmann's initializer lists make, of every kind of value a pod's
// edits hold, and moves what it is given rather than copying it.
TEST(JsonObject, MakesWhatAnInitializerListMakes) {
  std::string value(40, 'v');
  const std::string kept = value;
  json inner = json::array({1, "two"});
  const json made = jsonObject("name", std::string_view("x"), "value", std::move(value), "count", 3, "flag", true,
                               "inner", std::move(inner), "nested", jsonObject("medium", "Memory"), "none", nullptr);
  const json expected = {{"name", "x"}, {"value", kept}, {"count", 3}, {"flag", true}, {"inner", json::array({1, "two"})},
                         {"nested", {{"medium", "Memory"}}}, {"none", nullptr}};
  EXPECT_EQ(made, expected);
  EXPECT_EQ(made.dump(), expected.dump());
  EXPECT_TRUE(inner.is_null());  // NOLINT(bugprone-use-after-move): moved, not copied
  EXPECT_EQ(jsonObject(), json::object());
  EXPECT_EQ(jsonObject("k", 1, "k", 2), json({{"k", 1}}));  // the first of a key stays, as emplace keeps it
}

// compareKeys orders as std::string's compare does, wherever two keys first differ, at
// every length either has up to 20 (the word-wide steps, their overlapping ends and the
// byte loop), a byte from 0x80 included (memcmp compares bytes unsigned).
TEST(CompareKeys, OrdersAsStringCompare) {
  auto sign = [](int v) { return (v > 0) - (v < 0); };
  for (std::size_t n = 0; n <= 20; ++n) {
    const std::string base(n, 'k');
    std::vector<std::string> others;
    for (std::size_t m = 0; m <= 20; ++m) others.push_back(std::string(m, 'k'));
    for (std::size_t at = 0; at < n; ++at) {
      for (char c : {'a', 'z', '\x80', '\xff', '\0'}) {
        std::string other = base;
        other[at] = c;
        others.push_back(other);
        others.push_back(other.substr(0, at + 1));
      }
    }
    // Different in the first word and in the last one, in opposite directions: the first
    // difference decides.
    if (n >= 2) {
      std::string low = base, high = base;
      low.front() = 'a';
      low.back() = 'z';
      high.front() = 'z';
      high.back() = 'a';
      others.push_back(low);
      others.push_back(high);
    }
    for (const std::string& other : others) {
      EXPECT_EQ(compareKeys(base, other), sign(std::string_view(base).compare(other))) << n << " vs " << other.size();
      EXPECT_EQ(compareKeys(other, base), sign(std::string_view(other).compare(base))) << n << " vs " << other.size();
    }
  }
}

}  // namespace
}  // namespace podshaper
