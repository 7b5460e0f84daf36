// The runner does to the queue what a reconcile answers, the same for every controller,
// and counts it under the controller's name. Driven by processOne/drain on the test's
// thread, with the queue's clock the test's.
#include "operator/runner.h"

#include <gtest/gtest.h>

#include <deque>

namespace podshaper::op {
namespace {

using Outcome = Reconciler::Outcome;
using namespace std::chrono_literals;

class RunnerTest : public ::testing::Test {
 protected:
  WorkQueue::Clock::time_point now{};
  metrics::Registry registry;
  std::deque<Reconciler::Result> answers;  // what the reconciles answer, in turn; then Done
  std::vector<std::string> reconciled;
  Runner runner{{.name = "report", .now = [this] { return now; }}, registry, [this](const std::string& key) {
                  reconciled.push_back(key);
                  if (answers.empty()) return Reconciler::Result{};
                  auto r = answers.front();
                  answers.pop_front();
                  return r;
                }};

  bool has(const std::string& sample) const { return registry.render().find(sample + "\n") != std::string::npos; }
};

TEST_F(RunnerTest, DoneLooksAgainAfterRequeueAfter) {
  answers = {{Outcome::Done, 5s}};
  runner.add("a");
  runner.add("a");  // queued once
  EXPECT_EQ(runner.drain(), 1);
  EXPECT_EQ(runner.waiting(), 1u);
  now += 4s;
  EXPECT_EQ(runner.drain(), 0);
  now += 1s;
  EXPECT_EQ(runner.drain(), 1);
  EXPECT_EQ(runner.waiting(), 0u);  // Done without requeueAfter: nothing more
  EXPECT_TRUE(has("podshaper_operator_reconciles_total{controller=\"report\",result=\"ok\"} 2"));
}

TEST_F(RunnerTest, NotLeaderForgetsTheKey) {
  answers = {{Outcome::NotLeader, std::nullopt}};
  runner.add("a");
  EXPECT_TRUE(runner.processOne());
  EXPECT_FALSE(runner.processOne());
  EXPECT_EQ(runner.waiting(), 0u);
  EXPECT_EQ(runner.depth(), 0u);
  EXPECT_TRUE(has("podshaper_operator_reconciles_total{controller=\"report\",result=\"not_leader\"} 1"));
}

TEST_F(RunnerTest, RetryBacksOffPerKeyAndDoneStartsAgain) {
  answers = {{Outcome::Retry, std::nullopt}, {Outcome::Retry, std::nullopt}, {}, {Outcome::Retry, std::nullopt}};
  runner.add("a");
  EXPECT_EQ(runner.drain(), 1);
  now += 49ms;
  EXPECT_EQ(runner.drain(), 0);
  now += 1ms;  // 50 ms
  EXPECT_EQ(runner.drain(), 1);
  now += 99ms;
  EXPECT_EQ(runner.drain(), 0);
  now += 1ms;  // then 100 ms
  EXPECT_EQ(runner.drain(), 1);  // Done: its failures forgotten
  runner.add("a");
  EXPECT_EQ(runner.drain(), 1);  // fails again: 50 ms, not 200
  now += 50ms;
  EXPECT_EQ(runner.drain(), 1);
  EXPECT_TRUE(has("podshaper_operator_reconciles_total{controller=\"report\",result=\"error\"} 3"));
  EXPECT_TRUE(has("podshaper_operator_reconciles_total{controller=\"report\",result=\"ok\"} 2"));
}

TEST_F(RunnerTest, AThrowingReconcileIsRetried) {
  Runner throwing{{.name = "pod", .now = [this] { return now; }}, registry,
                  [](const std::string&) -> Reconciler::Result { throw std::runtime_error("bad object"); }};
  throwing.add("ml/train-0");
  EXPECT_EQ(throwing.drain(), 1);
  EXPECT_EQ(throwing.waiting(), 1u);
  EXPECT_TRUE(has("podshaper_operator_reconciles_total{controller=\"pod\",result=\"error\"} 1"));
}

TEST_F(RunnerTest, EachControllerHasItsOwnSeries) {
  Runner pods{{.name = "pod", .now = [this] { return now; }}, registry,
              [](const std::string&) { return Reconciler::Result{}; }};
  runner.add("a");
  pods.add("ml/a");
  pods.add("ml/b");
  EXPECT_EQ(runner.drain(), 1);
  EXPECT_EQ(pods.drain(), 2);
  EXPECT_TRUE(has("podshaper_operator_reconciles_total{controller=\"report\",result=\"ok\"} 1"));
  EXPECT_TRUE(has("podshaper_operator_reconciles_total{controller=\"pod\",result=\"ok\"} 2"));
  EXPECT_TRUE(has("podshaper_operator_reconcile_duration_seconds_count{controller=\"pod\"} 2"));
  EXPECT_TRUE(has("podshaper_operator_queue_depth{controller=\"report\"} 0"));
  EXPECT_TRUE(has("podshaper_operator_queue_depth{controller=\"pod\"} 0"));
}

TEST_F(RunnerTest, WorkersReconcileUntilStopped) {
  runner.start(2);
  runner.stop();  // joins at once: no key, no wait
  runner.add("a");
  EXPECT_EQ(runner.drain(), 0);  // shut down: nothing handed out
}

}  // namespace
}  // namespace podshaper::op
