#include "base/text.h"

#include <gtest/gtest.h>

#include <utility>

namespace podshaper {
namespace {

TEST(Joined, PutsTheSeparatorBetweenItems) {
  EXPECT_EQ(joined({}), "");
  EXPECT_EQ(joined({"a"}), "a");
  EXPECT_EQ(joined({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(joined({"a", "b"}, " or "), "a or b");
}

TEST(SomeOf, NamesAFewAndCountsTheRest) {
  EXPECT_EQ(someOf({}), "");
  EXPECT_EQ(someOf({"n1", "n2", "n3"}), "n1, n2, n3");
  EXPECT_EQ(someOf({"n1", "n2", "n3", "n4", "n5"}), "n1, n2, n3 and 2 more");
  EXPECT_EQ(someOf({"n1", "n2", "n3"}, 1), "n1 and 2 more");
}

TEST(SomeOf, WritesOnlyTheItemsShown) {
  const std::vector<std::pair<std::string, int>> nodes = {{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}};
  int written = 0;
  const std::string out = someOf(nodes, 2, [&](const auto& n) {
    ++written;
    return n.first + " (" + std::to_string(n.second) + ")";
  });
  EXPECT_EQ(out, "a (1), b (2) and 2 more");
  EXPECT_EQ(written, 2);
}

}  // namespace
}  // namespace podshaper
