#include "base/json_util.h"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace podshaper
