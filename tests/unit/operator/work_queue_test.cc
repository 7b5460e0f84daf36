#include "operator/work_queue.h"

#include "tests/unit/support/eventually.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

namespace podshaper::op {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueue, AKeyIsQueuedOnce) {
  WorkQueue q;
  q.add("a");
  q.add("b");
  q.add("a");
  EXPECT_EQ(q.depth(), 2u);
  EXPECT_EQ(q.get(), "a");
  EXPECT_EQ(q.get(), "b");
  EXPECT_EQ(q.depth(), 0u);
}

TEST(WorkQueue, AKeyBeingReconciledIsNotHandedOutTwice) {
  WorkQueue q;
  q.add("a");
  ASSERT_EQ(q.get(), "a");
  q.add("a");  // changed while being reconciled
  EXPECT_EQ(q.depth(), 0u);
  q.add("b");
  EXPECT_EQ(q.get(), "b");
  q.done("a");  // now it goes again, once
  EXPECT_EQ(q.depth(), 1u);
  EXPECT_EQ(q.get(), "a");
  q.done("a");
  q.done("b");
  EXPECT_EQ(q.depth(), 0u);
}

TEST(WorkQueue, AddAfterWaitsAndTheEarliestWins) {
  WorkQueue q;
  auto start = std::chrono::steady_clock::now();
  q.addAfter("late", 10s);
  q.addAfter("soon", 300ms);
  q.addAfter("soon", 100ms);
  EXPECT_EQ(q.waiting(), 2u);
  EXPECT_EQ(q.get(), "soon");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 90ms);
  EXPECT_LT(took, 2s);
  q.add("late");  // an add does not wait
  EXPECT_EQ(q.get(), "late");
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(WorkQueue, RetriesBackOffPerKeyAndForgetResets) {
  WorkQueue q(100ms, 10s);
  auto timed = [&](const std::string& key) {
    auto start = std::chrono::steady_clock::now();
    q.retry(key);
    EXPECT_EQ(q.get(), key);
    q.done(key);
    return std::chrono::steady_clock::now() - start;
  };
  EXPECT_GE(timed("k"), 95ms);
  EXPECT_GE(timed("k"), 195ms);
  EXPECT_GE(timed("k"), 395ms);
  q.forget("k");
  // 100 ms again, not 800: the margin is for a slow machine (make test-sanitize).
  EXPECT_LT(timed("k"), 600ms);
}

TEST(WorkQueue, ShutDownWakesAWaitingWorker) {
  WorkQueue q;
  std::optional<std::string> got = "x";
  std::thread worker([&] { got = q.get(); });
  std::this_thread::sleep_for(50ms);
  q.shutDown();
  worker.join();
  EXPECT_FALSE(got);
  q.add("a");
  EXPECT_EQ(q.depth(), 0u);
}

// Two workers wait for the same delayed key; the first to wake takes it and frees its
// entry while the other is still inside its wait (the operator runs two workers). Under
// AddressSanitizer (make test-sanitize) a wait that still read the freed entry fails here.
TEST(WorkQueue, TwoWorkersWaitingForTheSameDelayedKey) {
  for (int round = 0; round < 20; ++round) {
    WorkQueue q;
    q.addAfter("a", 20ms);
    std::optional<std::string> first, second;
    std::atomic<int> returned{0};
    std::thread one([&] { first = q.get(); ++returned; });
    std::thread two([&] { second = q.get(); ++returned; });
    // Until one has taken it, however slow the machine; then the other is given time to
    // take it too, which it must not.
    support::eventually([&] { return returned > 0; });
    std::this_thread::sleep_for(40ms);
    q.shutDown();
    one.join();
    two.join();
    EXPECT_NE(first.has_value(), second.has_value());  // handed out once
    EXPECT_EQ(first.value_or(second.value_or("")), "a");
  }
}

// Reports wait to go stale, one key each: thousands wait while others are handed out.
// They come due in the order of their times, and a key added now goes before them.
TEST(WorkQueue, ManyWaitingKeysComeDueInTimeOrder) {
  WorkQueue q;
  // Each key's time from one start, 2 ms apart (k299 first): a delay counted from each
  // add's own moment would let a slow loop (a loaded machine, a sanitizer) swap neighbours.
  const auto start = WorkQueue::Clock::now();
  const auto dueOf = [&](int i) { return start + std::chrono::milliseconds(200 + 2 * (300 - i)); };
  for (int i = 0; i < 300; ++i) q.addAfter("k" + std::to_string(i), dueOf(i) - WorkQueue::Clock::now());
  q.addAfter("k299", 1h);  // a later time for a waiting key: the earlier one stays
  q.add("now");
  EXPECT_EQ(q.waiting(), 300u);
  EXPECT_EQ(q.get(), "now");
  q.done("now");
  std::this_thread::sleep_until(dueOf(0) + 10ms);
  for (int i = 299; i >= 0; --i) {
    auto key = q.get();
    ASSERT_EQ(key, "k" + std::to_string(i));
    q.done(*key);
  }
  EXPECT_EQ(q.waiting(), 0u);
  q.addAfter("again", 1h);
  q.add("again");  // added now: no longer waiting
  EXPECT_EQ(q.waiting(), 0u);
  EXPECT_EQ(q.get(), "again");
}

}  // namespace
}  // namespace podshaper::op
