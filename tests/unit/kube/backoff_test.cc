#include "kube/backoff.h"

#include <gtest/gtest.h>

namespace podshaper::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(Backoff, DoublesWithinJitterUpToTheCap) {
  Backoff b(milliseconds(500), seconds(30), 0.5, /*seed=*/42);
  milliseconds step(500);
  for (int i = 0; i < 20; ++i) {
    const milliseconds d = b.next();
    EXPECT_LE(d, step) << "attempt " << i;
    EXPECT_GE(d, step / 2) << "attempt " << i;
    EXPECT_LE(d, seconds(30));
    step = std::min<milliseconds>(step * 2, seconds(30));
  }
}

TEST(Backoff, ReachesTheCapAndStaysThere) {
  Backoff b(milliseconds(500), seconds(30), 0.0, 1);
  milliseconds last{};
  for (int i = 0; i < 12; ++i) last = b.next();
  EXPECT_EQ(last, seconds(30));
}

TEST(Backoff, ResetStartsOver) {
  Backoff b(milliseconds(100), seconds(30), 0.0, 1);
  EXPECT_EQ(b.next(), milliseconds(100));
  EXPECT_EQ(b.next(), milliseconds(200));
  EXPECT_EQ(b.next(), milliseconds(400));
  b.reset();
  EXPECT_EQ(b.next(), milliseconds(100));
}

TEST(Backoff, JitterSpreadsClients) {
  Backoff a(milliseconds(1000), seconds(30), 0.5, 1);
  Backoff b(milliseconds(1000), seconds(30), 0.5, 2);
  int differ = 0;
  for (int i = 0; i < 5; ++i) differ += a.next() != b.next();
  EXPECT_GT(differ, 0);
}

}  // namespace
}  // namespace podshaper::kube
