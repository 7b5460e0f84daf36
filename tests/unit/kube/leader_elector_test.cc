// LeaderElector over the wire: against a hung server, an unreachable one, and the
// shared fake API server (list by name, create, replace with the resourceVersion
// precondition) that each elector reaches through a door of its own, so that one of
// them can be cut off. The real kube-apiserver comes in the end-to-end tests.
#include "kube/leader_elector.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "tests/unit/kube/black_hole.h"
#include "tests/unit/support/eventually.h"
#include "tests/unit/support/fake_api_server.h"

namespace podshaper::kube {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kNamespace = "podshaper-system";
constexpr const char* kName = "podshaper-operator";

// The Lease API of one namespace: the shared fake API server, which each elector
// reaches through a door of its own.
class FakeLeaseApi {
 public:
  int openDoor() { return server_.openDoor(); }
  std::string url(int door) const { return server_.url(door); }
  void cut(int door, bool cut) { server_.cut(door, cut); }

  std::optional<json> lease() const { return server_.object(path()); }
  std::string holder() const {
    auto l = lease();
    return l ? l->at("spec").value("holderIdentity", "") : "";
  }
  // Someone else (an admin, a buggy replica) writes the lease unconditionally.
  void overwrite(json spec) {
    json l = *lease();
    l["spec"] = std::move(spec);
    server_.put(path(), l);
  }

 private:
  static std::string path() {
    return std::string("/apis/coordination.k8s.io/v1/namespaces/") + kNamespace + "/leases/" + kName;
  }
  fakes::FakeApiServer server_;
};

// The smallest timings validate() allows: a test takes seconds, not minutes.
LeaseConfig fastConfig(const std::string& identity) {
  LeaseConfig c;
  c.ns = kNamespace;
  c.name = kName;
  c.identity = identity;
  c.leaseDuration = 3s;
  c.renewDeadline = 2s;
  c.retryPeriod = 1s;
  return c;
}

using support::eventually;

// Counts callbacks and remembers when they came.
struct Callbacks {
  std::atomic<int> started{0}, stopped{0};
  std::atomic<long long> stoppedAt{0};
  std::function<void()> onStarted() {
    return [this] { ++started; };
  }
  std::function<void()> onStopped() {
    return [this] {
      ++stopped;
      stoppedAt = std::chrono::steady_clock::now().time_since_epoch().count();
    };
  }
};

TEST(LeaderElector, InvalidConfigIsRefused) {
  Client client(serverAt("http://127.0.0.1:1"));
  LeaseConfig c = fastConfig("a");
  c.renewDeadline = 3s;
  EXPECT_THROW(LeaderElector(client, c, nullptr, nullptr), std::invalid_argument);
}

TEST(LeaderElector, StopIsPromptWhileARequestHangs) {
  BlackHole hole;
  Client client(serverAt(hole.url()));
  Callbacks cb;
  LeaderElector elector(client, fastConfig("a"), cb.onStarted(), cb.onStopped());
  elector.start();
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(elector.isLeading());
  EXPECT_EQ(elector.holder(), "");
  const auto start = std::chrono::steady_clock::now();
  elector.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(cb.started, 0);
  EXPECT_EQ(cb.stopped, 0);
}

TEST(LeaderElector, UnreachableServerNeverLeads) {
  Client client(serverAt("http://127.0.0.1:1"));
  Callbacks cb;
  LeaseConfig c = fastConfig("a");
  c.leaseDuration = 30s, c.renewDeadline = 20s, c.retryPeriod = 10s;  // stop() comes while it waits to retry
  LeaderElector elector(client, c, cb.onStarted(), cb.onStopped());
  elector.start();
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(elector.isLeading());
  const auto start = std::chrono::steady_clock::now();
  elector.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(cb.started, 0);
}

TEST(LeaderElector, CreatesTheLeaseRenewsItAndReleasesItOnStop) {
  FakeLeaseApi api;
  Client client(serverAt(api.url(api.openDoor())));
  Callbacks cb;
  LeaderElector elector(client, fastConfig("a"), cb.onStarted(), cb.onStopped());
  elector.start();
  ASSERT_TRUE(eventually([&] { return elector.isLeading(); }, 2s));
  // onStartedLeading runs on the elector's thread just after isLeading() turns true.
  ASSERT_TRUE(eventually([&] { return cb.started == 1; }, 1s));
  EXPECT_EQ(elector.holder(), "a");
  const json first = *api.lease();
  EXPECT_EQ(first["spec"]["holderIdentity"], "a");
  EXPECT_EQ(first["spec"]["leaseDurationSeconds"], 3);
  EXPECT_EQ(first["spec"]["leaseTransitions"], 0);

  // Past leaseDuration: it has kept renewing, and nothing changed hands.
  std::this_thread::sleep_for(3500ms);
  EXPECT_TRUE(elector.isLeading());
  EXPECT_EQ(cb.started, 1);
  EXPECT_EQ(cb.stopped, 0);
  const json later = *api.lease();
  EXPECT_NE(later["spec"]["renewTime"], first["spec"]["renewTime"]);
  EXPECT_EQ(later["spec"]["acquireTime"], first["spec"]["acquireTime"]);
  EXPECT_EQ(later["spec"]["leaseTransitions"], 0);

  const auto start = std::chrono::steady_clock::now();
  elector.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_FALSE(elector.isLeading());
  EXPECT_EQ(cb.stopped, 1);
  EXPECT_EQ(api.holder(), "") << "released";
  EXPECT_EQ((*api.lease())["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(elector.holder(), "");
}

TEST(LeaderElector, StandbyTakesOverAtOnceAfterARelease) {
  FakeLeaseApi api;
  Client clientA(serverAt(api.url(api.openDoor())));
  Client clientB(serverAt(api.url(api.openDoor())));
  Callbacks cbA, cbB;
  LeaderElector a(clientA, fastConfig("a"), cbA.onStarted(), cbA.onStopped());
  LeaderElector b(clientB, fastConfig("b"), cbB.onStarted(), cbB.onStopped());
  a.start();
  ASSERT_TRUE(eventually([&] { return a.isLeading(); }, 2s));
  b.start();
  ASSERT_TRUE(eventually([&] { return b.holder() == "a"; }, 2s));
  std::this_thread::sleep_for(1500ms);
  EXPECT_FALSE(b.isLeading()) << "a renews: b waits";
  EXPECT_EQ(cbB.started, 0);

  a.stop();
  const auto released = std::chrono::steady_clock::now();
  // b's next try (retryPeriod, +20%), not the 3 s lease.
  ASSERT_TRUE(eventually([&] { return b.isLeading(); }, 2500ms));
  EXPECT_LT(std::chrono::steady_clock::now() - released, 2s);
  EXPECT_EQ(api.holder(), "b");
  EXPECT_EQ((*api.lease())["spec"]["leaseTransitions"], 1);
  ASSERT_TRUE(eventually([&] { return cbB.started == 1; }, 1s));
  b.stop();
}

TEST(LeaderElector, CutOffLeaderStepsDownBeforeTheStandbyTakesOver) {
  FakeLeaseApi api;
  const int doorA = api.openDoor();
  Client clientA(serverAt(api.url(doorA)));
  Client clientB(serverAt(api.url(api.openDoor())));
  Callbacks cbA;
  LeaderElector a(clientA, fastConfig("a"), cbA.onStarted(), cbA.onStopped());
  std::atomic<int> bStarted{0};
  std::atomic<bool> aLeadingWhenBStarted{true};
  std::atomic<long long> bStartedAt{0};
  LeaderElector b(
      clientB, fastConfig("b"),
      [&] {
        aLeadingWhenBStarted = a.isLeading();
        bStartedAt = std::chrono::steady_clock::now().time_since_epoch().count();
        ++bStarted;
      },
      nullptr);
  a.start();
  ASSERT_TRUE(eventually([&] { return a.isLeading(); }, 2s));
  b.start();
  ASSERT_TRUE(eventually([&] { return b.holder() == "a"; }, 2s));

  api.cut(doorA, true);
  const auto cutAt = std::chrono::steady_clock::now();
  // a gives up by its renew deadline (2 s after its last renewal).
  ASSERT_TRUE(eventually([&] { return !a.isLeading(); }, 2500ms));
  ASSERT_TRUE(eventually([&] { return cbA.stopped == 1; }, 1s)) << "onStoppedLeading comes at the deadline";
  // b waits out the lease (3 s after it last saw a renew) and takes over.
  ASSERT_TRUE(eventually([&] { return b.isLeading(); }, 5s));
  EXPECT_GT(std::chrono::steady_clock::now() - cutAt, 1500ms);
  ASSERT_TRUE(eventually([&] { return bStarted == 1; }, 1s));
  EXPECT_FALSE(aLeadingWhenBStarted);
  EXPECT_LT(cbA.stoppedAt.load(), bStartedAt.load());
  EXPECT_EQ((*api.lease())["spec"]["leaseTransitions"], 1);

  // a reaches the API server again: it sees b and stays a candidate.
  api.cut(doorA, false);
  ASSERT_TRUE(eventually([&] { return a.holder() == "b"; }, 2s));
  std::this_thread::sleep_for(1200ms);
  EXPECT_FALSE(a.isLeading());
  EXPECT_EQ(cbA.started, 1);
  a.stop();
  EXPECT_EQ(api.holder(), "b") << "a must not release b's lease";
  EXPECT_TRUE(b.isLeading());
  b.stop();
}

TEST(LeaderElector, DeposedLeaderStepsDownAtOnce) {
  FakeLeaseApi api;
  Client client(serverAt(api.url(api.openDoor())));
  Callbacks cb;
  LeaseConfig c = fastConfig("a");
  c.leaseDuration = 30s, c.renewDeadline = 20s;  // so that stepping down by the deadline would take 20 s
  LeaderElector elector(client, c, cb.onStarted(), cb.onStopped());
  elector.start();
  ASSERT_TRUE(eventually([&] { return elector.isLeading(); }, 2s));

  // Someone writes another holder into the lease: a's next renewal gets a 409,
  // it reads the lease again at once and steps down without waiting for its deadline.
  api.overwrite({{"holderIdentity", "intruder"},
                 {"leaseDurationSeconds", 3},
                 {"renewTime", "2026-11-22T01:15:44.000000Z"},
                 {"leaseTransitions", 1}});
  ASSERT_TRUE(eventually([&] { return cb.stopped == 1; }, 3s));
  EXPECT_FALSE(elector.isLeading());
  EXPECT_EQ(elector.holder(), "intruder");
  elector.stop();
  EXPECT_EQ(cb.stopped, 1);
  EXPECT_EQ(api.holder(), "intruder") << "not released: it is not ours";
}

}  // namespace
}  // namespace podshaper::kube
