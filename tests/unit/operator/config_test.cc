#include "operator/config.h"

#include <gtest/gtest.h>

namespace podshaper::op {
namespace {

TEST(OperatorConfig, DefaultsAndEverySetting) {
  auto d = parseOperatorConfig("");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->listen, ":8443");
  EXPECT_TRUE(d->leaderElection);
  EXPECT_EQ(d->leaseDuration, std::chrono::seconds(15));
  auto c = parseOperatorConfig(R"(
listen: 127.0.0.1:9443
eventNamespace: podshaper-system
workers: 4
leaderElection:
  enabled: false
  namespace: ops
  name: op
  leaseDuration: 1m
  renewDeadline: 40s
  retryPeriod: 5s
)");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->listen, "127.0.0.1:9443");
  EXPECT_EQ(c->eventNamespace, "podshaper-system");
  EXPECT_EQ(c->workers, 4);
  EXPECT_FALSE(c->leaderElection);
  EXPECT_EQ(c->leaseNamespace, "ops");
  EXPECT_EQ(c->leaseName, "op");
  EXPECT_EQ(c->leaseDuration, std::chrono::seconds(60));
  EXPECT_EQ(c->renewDeadline, std::chrono::seconds(40));
  EXPECT_EQ(c->retryPeriod, std::chrono::seconds(5));
}

TEST(OperatorConfig, ErrorsNameTheKey) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"workres: 2", "workres: unknown setting"},
      {"workers: 0", "workers: \"0\": expected 1..64"},
      {"leaderElection: {leaseDuration: 15}", "leaderElection.leaseDuration: \"15\": expected a duration"},
      {"leaderElection: {enabled: yes}", "leaderElection.enabled: \"yes\": expected true or false"},
      {"leaderElection: {lease: x}", "leaderElection.lease: unknown setting"},
      {"tlsCertFile: a.crt", "tlsCertFile and tlsKeyFile go together"},
      {"listen: [a, b]", "listen: expected a single value"},
      {"- a", "expected a map of settings"},
      {"a: [", "not YAML"},
  };
  for (const auto& [yaml, message] : cases) {
    auto c = parseOperatorConfig(yaml);
    ASSERT_FALSE(c) << yaml;
    EXPECT_NE(c.error().message.find(message), std::string::npos) << yaml << ": " << c.error().message;
  }
}

}  // namespace
}  // namespace podshaper::op
