// The Informer's store rules are tested as data in store_test.cc; here, its
// life cycle without an API server: it never claims to be synced, and stop()
// is prompt whether the informer is blocked in a request or backing off.
#include "kube/informer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/unit/kube/black_hole.h"

namespace podshaper::kube {
namespace {

using namespace std::chrono_literals;

TEST(Informer, StopIsPromptWhileARequestHangs) {
  BlackHole hole;
  Client client(serverAt(hole.url()));
  Informer informer(client, "/api/v1/nodes");
  int changes = 0;
  informer.onChange([&] { ++changes; });
  informer.start();
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(informer.hasSynced());
  const auto start = std::chrono::steady_clock::now();
  informer.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(changes, 0);
  EXPECT_TRUE(informer.snapshot().empty());
}

TEST(Informer, StopIsPromptWhileBackingOff) {
  Client client(serverAt("http://127.0.0.1:1"));
  InformerOptions options;
  options.initialBackoff = 10s;
  Informer informer(client, "/api/v1/namespaces", options);
  informer.start();
  std::this_thread::sleep_for(200ms);  // the list has failed; it waits 5-10 s to retry
  EXPECT_FALSE(informer.hasSynced());
  const auto start = std::chrono::steady_clock::now();
  informer.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

TEST(Informer, DestructorStops) {
  Client client(serverAt("http://127.0.0.1:1"));
  const auto start = std::chrono::steady_clock::now();
  {
    Informer informer(client, "/api/v1/nodes");
    informer.start();
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

}  // namespace
}  // namespace podshaper::kube
