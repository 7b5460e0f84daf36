#include "cli/diff.h"

#include <gtest/gtest.h>

namespace podshaper::cli {
namespace {

TEST(UnifiedDiff, EqualTextsHaveNone) { EXPECT_EQ(unifiedDiff("a\nb\n", "a\nb\n", "x", "y"), ""); }

TEST(UnifiedDiff, AsDiffUWritesIt) {
  // diff -u of these two files, line for line.
  const std::string before = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n";
  const std::string after = "1\n2\n3\nfour\n5\n6\n7\n8\n9\n10\n11\n12\n13\n";
  EXPECT_EQ(unifiedDiff(before, after, "a", "b"),
            "--- a\n+++ b\n"
            "@@ -1,7 +1,7 @@\n 1\n 2\n 3\n-4\n+four\n 5\n 6\n 7\n"
            "@@ -10,3 +10,4 @@\n 10\n 11\n 12\n+13\n");
}

TEST(UnifiedDiff, ChangesCloseTogetherShareAHunk) {
  EXPECT_EQ(unifiedDiff("a\nb\nc\nd\ne\n", "A\nb\nc\nd\nE\n", "a", "b"),
            "--- a\n+++ b\n@@ -1,5 +1,5 @@\n-a\n+A\n b\n c\n d\n-e\n+E\n");
}

TEST(UnifiedDiff, IntoAndOutOfNothing) {
  EXPECT_EQ(unifiedDiff("", "x\n", "a", "b"), "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n");
  EXPECT_EQ(unifiedDiff("x\n", "", "a", "b"), "--- a\n+++ b\n@@ -1 +0,0 @@\n-x\n");
  EXPECT_EQ(unifiedDiff("x", "y", "a", "b"),
            "--- a\n+++ b\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file\n");
}

TEST(UnifiedDiff, LargeTextsStayCheap) {
  std::string before, after;
  for (int i = 0; i < 5000; ++i) {
    before += "line " + std::to_string(i) + "\n";
    after += "line " + std::to_string(i % 2 ? i : -i) + "\n";
  }
  const std::string diff = unifiedDiff(before, after, "a", "b");
  EXPECT_NE(diff.find("-line 2\n"), std::string::npos);
  EXPECT_NE(diff.find("+line -2\n"), std::string::npos);
}

}  // namespace
}  // namespace podshaper::cli
