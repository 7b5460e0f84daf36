// The rules of Lease leader election as data: what a candidate decides from the
// record it read and the times it was seen, and the Lease JSON it writes.
#include "kube/lease.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace podshaper::kube {
namespace {

using namespace std::chrono_literals;

constexpr long long kSecond = 1'000'000;
// Two clocks that are never compared: a steady clock that started at boot and a
// wall clock (2026-11-22T01:15:44Z). A test that mixed them would fail loudly.
constexpr long long kBoot = 5'000 * kSecond;
constexpr long long kWall = 1'795'310'144LL * kSecond;

LeaseConfig config(std::string identity = "operator-a") {
  LeaseConfig c;
  c.ns = "podshaper-system";
  c.name = "podshaper-operator";
  c.identity = std::move(identity);
  return c;  // 15 s / 10 s / 2 s
}

LeaseRecord heldBy(std::string holder, long long transitions = 3, long long durationSeconds = 15) {
  LeaseRecord r;
  r.holderIdentity = std::move(holder);
  r.leaseDurationSeconds = durationSeconds;
  r.acquireTimeMicros = kWall - 600 * kSecond;
  r.renewTimeMicros = kWall - 1 * kSecond;
  r.leaseTransitions = transitions;
  r.resourceVersion = "4711";
  return r;
}

struct DecisionCase {
  std::string description;
  LeaseRecord observed;
  long long observedAt;  // steady clock
  long long now;         // steady clock
  LeaseAction action;
  long long transitions;    // of the record to write (Wait: the observed one)
  bool acquireTimeIsNow;    // Acquire sets it; Renew keeps it
};

TEST(LeaseDecide, Table) {
  const std::vector<DecisionCase> cases = {
      {"a free lease (released) is acquired, and that is a transition", heldBy(""), kBoot, kBoot,
       LeaseAction::Acquire, 4, true},
      {"another holder seen renewing just now: wait", heldBy("operator-b"), kBoot, kBoot, LeaseAction::Wait, 3,
       false},
      {"another holder, 14.999 s after we saw it renew: still wait", heldBy("operator-b"), kBoot,
       kBoot + 15 * kSecond - 1, LeaseAction::Wait, 3, false},
      {"another holder, exactly leaseDuration after we saw it renew: expired, take over", heldBy("operator-b"),
       kBoot, kBoot + 15 * kSecond, LeaseAction::Acquire, 4, true},
      {"another holder that declared 60 s: its duration counts, not ours", heldBy("operator-b", 3, 60), kBoot,
       kBoot + 30 * kSecond, LeaseAction::Wait, 3, false},
      {"another holder with no leaseDurationSeconds: ours counts", heldBy("operator-b", 3, 0), kBoot,
       kBoot + 15 * kSecond, LeaseAction::Acquire, 4, true},
      {"our own lease: renew, keeping acquireTime and transitions", heldBy("operator-a"), kBoot,
       kBoot + 2 * kSecond, LeaseAction::Renew, 3, false},
      {"our own lease, even long unseen: renew, nothing changed hands", heldBy("operator-a"), kBoot,
       kBoot + 3600 * kSecond, LeaseAction::Renew, 3, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.description);
    const LeaseDecision d = decideLease(config(), {c.observed, c.observedAt}, c.now, kWall);
    EXPECT_EQ(d.action, c.action) << toString(d.action);
    EXPECT_EQ(d.record.leaseTransitions, c.transitions);
    EXPECT_EQ(d.record.resourceVersion, "4711");  // the precondition of the write
    if (c.action == LeaseAction::Wait) {
      EXPECT_EQ(d.record, c.observed);
      EXPECT_GT(d.expiresAtMicros, c.now);
      continue;
    }
    EXPECT_EQ(d.record.holderIdentity, "operator-a");
    EXPECT_EQ(d.record.leaseDurationSeconds, 15);
    EXPECT_EQ(d.record.renewTimeMicros, kWall);
    EXPECT_EQ(d.record.acquireTimeMicros, c.acquireTimeIsNow ? kWall : c.observed.acquireTimeMicros);
  }
}

// client-go's rule: a renewTime written by another machine's clock says nothing
// about expiry; only when we saw it change does.
TEST(LeaseDecide, WallClockTimesInTheRecordAreNotCompared) {
  LeaseRecord ancient = heldBy("operator-b");
  ancient.renewTimeMicros = kWall - 86'400 * kSecond;  // a day behind our wall clock
  EXPECT_EQ(decideLease(config(), {ancient, kBoot}, kBoot + kSecond, kWall).action, LeaseAction::Wait);

  LeaseRecord future = heldBy("operator-b");
  future.renewTimeMicros = kWall + 86'400 * kSecond;  // a day ahead
  EXPECT_EQ(decideLease(config(), {future, kBoot}, kBoot + 16 * kSecond, kWall).action, LeaseAction::Acquire);
}

TEST(LeaseDecide, WaitSaysWhenTheLeaseRunsOut) {
  const LeaseDecision d = decideLease(config(), {heldBy("operator-b", 3, 20), kBoot}, kBoot + kSecond, kWall);
  EXPECT_EQ(d.action, LeaseAction::Wait);
  EXPECT_EQ(d.expiresAtMicros, kBoot + 20 * kSecond);
}

TEST(LeaseDecide, AbsurdDurationDoesNotWrapToExpired) {
  const LeaseRecord r = heldBy("operator-b", 3, std::numeric_limits<long long>::max());
  EXPECT_EQ(decideLease(config(), {r, kBoot}, kBoot + 3600 * kSecond, kWall).action, LeaseAction::Wait);
}

TEST(LeaseDecide, OwnRecordWithoutAcquireTimeGetsOne) {
  LeaseRecord r = heldBy("operator-a");
  r.acquireTimeMicros.reset();
  const LeaseDecision d = decideLease(config(), {r, kBoot}, kBoot, kWall);
  EXPECT_EQ(d.action, LeaseAction::Renew);
  EXPECT_EQ(d.record.acquireTimeMicros, kWall);
}

// A lease passed a → b → a: each take-over counts once, renewals never.
TEST(LeaseDecide, TransitionsCountTakeOvers) {
  LeaseRecord r = newLeaseRecord(config("a"), kWall);
  EXPECT_EQ(r.leaseTransitions, 0);
  long long now = kBoot;
  const auto step = [&](const std::string& who, long long sawAt) {
    const LeaseDecision d = decideLease(config(who), {r, sawAt}, now, kWall + now - kBoot);
    EXPECT_NE(d.action, LeaseAction::Wait) << who;
    r = d.record;
  };
  step("a", now);  // renew
  now += 20 * kSecond;
  step("b", now - 20 * kSecond);  // a stopped renewing 20 s ago
  EXPECT_EQ(r.leaseTransitions, 1);
  step("b", now);  // renew
  EXPECT_EQ(r.leaseTransitions, 1);
  r = releasedLeaseRecord(r, kWall);
  step("a", now);  // free: taken at once
  EXPECT_EQ(r.leaseTransitions, 2);
  EXPECT_EQ(r.holderIdentity, "a");
}

TEST(LeaseObserve, TheLocalClockMovesOnlyWhenHolderOrRenewTimeChange) {
  const LeaseRecord r = heldBy("operator-b");
  LeaseObservation o = observeLease(std::nullopt, r, kBoot);
  EXPECT_EQ(o.observedAtMicros, kBoot) << "first read";

  LeaseRecord same = r;
  same.resourceVersion = "4712";  // someone edited a label
  o = observeLease(o, same, kBoot + 5 * kSecond);
  EXPECT_EQ(o.observedAtMicros, kBoot) << "resourceVersion alone does not extend the lease";
  EXPECT_EQ(o.record.resourceVersion, "4712") << "but the precondition is the newest";

  LeaseRecord renewed = same;
  renewed.renewTimeMicros = *r.renewTimeMicros + 2 * kSecond;
  o = observeLease(o, renewed, kBoot + 7 * kSecond);
  EXPECT_EQ(o.observedAtMicros, kBoot + 7 * kSecond) << "renewTime changed";

  LeaseRecord otherHolder = renewed;
  otherHolder.holderIdentity = "operator-c";
  o = observeLease(o, otherHolder, kBoot + 8 * kSecond);
  EXPECT_EQ(o.observedAtMicros, kBoot + 8 * kSecond) << "holder changed";
}

TEST(LeaseRelease, FreesTheLeaseKeepingHistory) {
  const LeaseRecord held = heldBy("operator-a");
  const LeaseRecord r = releasedLeaseRecord(held, kWall);
  EXPECT_EQ(r.holderIdentity, "");
  EXPECT_EQ(r.leaseDurationSeconds, 1);
  EXPECT_EQ(r.renewTimeMicros, kWall);
  EXPECT_EQ(r.acquireTimeMicros, held.acquireTimeMicros);
  EXPECT_EQ(r.leaseTransitions, 3);
  EXPECT_EQ(r.resourceVersion, "4711");
}

TEST(LeaseJson, BodyToCreateAndReplace) {
  LeaseRecord r = newLeaseRecord(config(), kWall + 123'456);
  EXPECT_EQ(leaseToJson(config(), r), nlohmann::json::parse(R"({
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "podshaper-operator", "namespace": "podshaper-system"},
    "spec": {"holderIdentity": "operator-a", "leaseDurationSeconds": 15,
             "acquireTime": "2026-11-22T01:15:44.123456Z", "renewTime": "2026-11-22T01:15:44.123456Z",
             "leaseTransitions": 0}})"));

  r = releasedLeaseRecord(r, kWall);
  r.resourceVersion = "99";
  r.acquireTimeMicros.reset();
  EXPECT_EQ(leaseToJson(config(), r), nlohmann::json::parse(R"({
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "podshaper-operator", "namespace": "podshaper-system", "resourceVersion": "99"},
    "spec": {"holderIdentity": "", "leaseDurationSeconds": 1,
             "renewTime": "2026-11-22T01:15:44.000000Z", "leaseTransitions": 0}})"));
}

TEST(LeaseJson, RoundTrip) {
  for (const LeaseRecord& r : {heldBy("operator-b"), heldBy(""), newLeaseRecord(config(), kWall + 1)}) {
    SCOPED_TRACE(r.holderIdentity);
    nlohmann::json body = leaseToJson(config(), r);
    EXPECT_EQ(leaseRecordFromJson(body), r);
  }
}

TEST(LeaseJson, ReadsWhatTheApiServerReturns) {
  // From kubectl get lease -o json (kube-controller-manager's, renamed).
  const auto lease = nlohmann::json::parse(R"({
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"creationTimestamp": "2026-11-22T00:00:00Z", "name": "podshaper-operator",
                 "namespace": "podshaper-system", "resourceVersion": "1234",
                 "uid": "0b7e5f32-5a6c-4bd3-9df2-0f4a1fd2b1a0"},
    "spec": {"acquireTime": "2026-11-22T00:00:01.500000Z", "holderIdentity": "operator-b_6f1c",
             "leaseDurationSeconds": 15, "leaseTransitions": 2, "renewTime": "2026-11-22T01:15:44.123456Z"}})");
  const LeaseRecord r = leaseRecordFromJson(lease);
  EXPECT_EQ(r.holderIdentity, "operator-b_6f1c");
  EXPECT_EQ(r.leaseDurationSeconds, 15);
  EXPECT_EQ(r.leaseTransitions, 2);
  EXPECT_EQ(r.resourceVersion, "1234");
  EXPECT_EQ(r.renewTimeMicros, kWall + 123'456);
  EXPECT_EQ(r.acquireTimeMicros, kWall - (4544 * kSecond) + 1'500'000);
}

TEST(LeaseJson, ToleratesMissingAndBadFields) {
  struct Case {
    std::string description;
    std::string json;
  };
  const std::vector<Case> cases = {
      {"no spec (a lease created empty, e.g. by kubectl)", R"({"metadata": {"resourceVersion": "7"}})"},
      {"null spec", R"({"metadata": {"resourceVersion": "7"}, "spec": null})"},
      {"wrong types", R"({"metadata": {"resourceVersion": "7"},
          "spec": {"holderIdentity": 5, "leaseDurationSeconds": "15", "renewTime": 12, "leaseTransitions": null}})"},
      {"times that do not parse", R"({"metadata": {"resourceVersion": "7"},
          "spec": {"acquireTime": "yesterday", "renewTime": ""}})"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.description);
    const LeaseRecord r = leaseRecordFromJson(nlohmann::json::parse(c.json));
    EXPECT_EQ(r.holderIdentity, "");
    EXPECT_EQ(r.leaseDurationSeconds, 0);
    EXPECT_FALSE(r.acquireTimeMicros);
    EXPECT_FALSE(r.renewTimeMicros);
    EXPECT_EQ(r.leaseTransitions, 0);
    EXPECT_EQ(r.resourceVersion, "7");
    // Free, so a candidate takes it.
    EXPECT_EQ(decideLease(config(), {r, kBoot}, kBoot, kWall).action, LeaseAction::Acquire);
  }
  EXPECT_EQ(leaseRecordFromJson(nlohmann::json("not an object")), LeaseRecord{});
}

TEST(LeasePaths, CollectionAndObject) {
  EXPECT_EQ(leasesPath(config()), "/apis/coordination.k8s.io/v1/namespaces/podshaper-system/leases");
  EXPECT_EQ(leasePath(config()), "/apis/coordination.k8s.io/v1/namespaces/podshaper-system/leases/podshaper-operator");
}

TEST(LeaseValidate, Table) {
  struct Case {
    std::string description;
    void (*edit)(LeaseConfig&);
    std::string error;  // empty: valid
  };
  const std::vector<Case> cases = {
      {"defaults", [](LeaseConfig&) {}, ""},
      {"no namespace", [](LeaseConfig& c) { c.ns.clear(); }, "lease: namespace is empty"},
      {"no name", [](LeaseConfig& c) { c.name.clear(); }, "lease: name is empty"},
      {"no identity", [](LeaseConfig& c) { c.identity.clear(); },
       "lease podshaper-system/podshaper-operator: identity is empty; use something unique to this process, such "
       "as the pod name"},
      {"zero retry period", [](LeaseConfig& c) { c.retryPeriod = 0s; },
       "lease podshaper-system/podshaper-operator: retryPeriod must be positive, not 0s"},
      {"negative retry period", [](LeaseConfig& c) { c.retryPeriod = -1s; },
       "lease podshaper-system/podshaper-operator: retryPeriod must be positive, not -1s"},
      {"renew deadline equal to retry period", [](LeaseConfig& c) { c.renewDeadline = 2s; },
       "lease podshaper-system/podshaper-operator: renewDeadline (2s) must be longer than retryPeriod (2s), or the "
       "leader gives up before its second try"},
      {"lease duration equal to renew deadline", [](LeaseConfig& c) { c.leaseDuration = 10s; },
       "lease podshaper-system/podshaper-operator: leaseDuration (10s) must be longer than renewDeadline (10s), so "
       "that a leader stops before another may take over"},
      {"lease duration shorter than renew deadline", [](LeaseConfig& c) { c.leaseDuration = 5s; },
       "lease podshaper-system/podshaper-operator: leaseDuration (5s) must be longer than renewDeadline (10s), so "
       "that a leader stops before another may take over"},
      {"smallest valid", [](LeaseConfig& c) { c.leaseDuration = 3s, c.renewDeadline = 2s, c.retryPeriod = 1s; },
       ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.description);
    LeaseConfig lc = config();
    c.edit(lc);
    const Result<void> r = validate(lc);
    if (c.error.empty()) {
      EXPECT_TRUE(r.ok()) << r.error().message;
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().message, c.error);
    }
  }
}

}  // namespace
}  // namespace podshaper::kube
