// The Client without an API server: configuration errors, unreachable servers,
// and how quickly `stop` ends a request that gets no answer. The protocol it
// speaks is tested as data in protocol_test.cc; the real API server comes in
// the end-to-end tests.
#include "kube/client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/unit/kube/black_hole.h"

namespace podshaper::kube {
namespace {

using namespace std::chrono_literals;

TEST(Client, NoServerIsAnErrorOnEveryRequest) {
  Client client(ClientConfig{});
  auto r = client.get("/api/v1/nodes");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().isTransport());
  EXPECT_EQ(r.error().message, "GET /api/v1/nodes: no API server URL configured");
}

TEST(Client, BadTlsMaterialIsReportedPerRequest) {
  ClientConfig c = serverAt("https://127.0.0.1:6443");
  c.caPem = "not a certificate";
  Client client(c);
  auto r = client.create("/api/v1/namespaces", {{"metadata", {{"name", "x"}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("POST /api/v1/namespaces: TLS: certificate authority"), std::string::npos)
      << r.error().message;
}

TEST(Client, ConnectionRefusedIsATransportError) {
  Client client(serverAt("http://127.0.0.1:1"));
  auto r = client.get("/api/v1/nodes/gpu-1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, 0);
  EXPECT_EQ(r.error().message.rfind("GET /api/v1/nodes/gpu-1: ", 0), 0u) << r.error().message;

  auto l = client.list("/api/v1/nodes", "podshaper.io/gpu-count=8");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().message.rfind("GET /api/v1/nodes: ", 0), 0u) << l.error().message;
}

TEST(Client, WatchWithStopAlreadySetReturnsAtOnce) {
  Client client(serverAt("http://127.0.0.1:1"));
  std::atomic<bool> stop{true};
  auto status = client.watch("/api/v1/nodes", "1", [](const WatchEvent&) { return true; }, stop);
  EXPECT_EQ(status.end, WatchEnd::Stopped);
  EXPECT_EQ(status.resourceVersion, "1");
}

TEST(Client, WatchOnRefusedConnectionIsAnError) {
  Client client(serverAt("http://127.0.0.1:1"));
  std::atomic<bool> stop{false};
  auto status = client.watch("/api/v1/nodes", "1", [](const WatchEvent&) { return true; }, stop);
  EXPECT_EQ(status.end, WatchEnd::Error);
  EXPECT_TRUE(status.error.isTransport());
  EXPECT_STREQ(toString(status.end), "error");
}

TEST(Client, StopEndsAWatchThatGetsNoAnswer) {
  BlackHole hole;  // accepts TCP connections, never answers
  Client client(serverAt(hole.url()));
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(300ms);
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto status = client.watch("/api/v1/nodes", "5", [](const WatchEvent&) { return true; }, stop);
  const auto took = std::chrono::steady_clock::now() - start;
  stopper.join();
  EXPECT_EQ(status.end, WatchEnd::Stopped);
  EXPECT_LT(took, 1500ms);
}

TEST(Client, StopEndsAListThatGetsNoAnswer) {
  BlackHole hole;
  ClientOptions options;
  options.requestTimeout = 20s;
  Client client(serverAt(hole.url()), options);
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(300ms);
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto r = client.list("/api/v1/nodes", "", "", &stop);
  const auto took = std::chrono::steady_clock::now() - start;
  stopper.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "GET /api/v1/nodes: stopped");
  EXPECT_LT(took, 1500ms);
}

TEST(Client, RequestTimeoutApplies) {
  BlackHole hole;
  ClientOptions options;
  options.requestTimeout = 500ms;
  Client client(serverAt(hole.url()), options);
  const auto start = std::chrono::steady_clock::now();
  auto r = client.get("/version");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().isTransport());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace
}  // namespace podshaper::kube
