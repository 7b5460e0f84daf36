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

TEST(OperatorConfig, WebhookCertificate) {
  auto d = parseOperatorConfig("");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->webhookCertificate.managed);  // only the install's config turns it on
  auto c = parseOperatorConfig(R"(
webhookCertificate:
  mode: operator
  namespace: ps
  secretName: tls
  webhookConfiguration: mwc
  service: hook
  dnsNames: [hook.example.com]
  ipAddresses: [127.0.0.1, "0:0::1"]
  caValidity: 1000h
  validity: 100h
  renewBefore: 10h
  checkInterval: 2s
)");
  ASSERT_TRUE(c) << c.error().message;
  const auto& w = c->webhookCertificate;
  EXPECT_TRUE(w.managed);
  EXPECT_EQ(w.secretName, "tls");
  EXPECT_EQ(w.webhookConfiguration, "mwc");
  EXPECT_EQ(w.validity, std::chrono::hours(100));
  EXPECT_EQ(w.checkInterval, std::chrono::seconds(2));
  EXPECT_EQ(w.sans(), (std::vector<std::string>{"hook", "hook.ps", "hook.ps.svc", "hook.ps.svc.cluster.local",
                                                "hook.example.com", "127.0.0.1", "::1"}));
}

TEST(OperatorConfig, ShmProfiles) {
  auto d = parseOperatorConfig("");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->shmProfiles.runsKept, 10u);
  EXPECT_EQ(d->shmProfiles.maxAgeSeconds, 14 * 24 * 3600);
  EXPECT_EQ(d->shmProfiles.headroomPercent, 20u);
  auto c = parseOperatorConfig(R"(
shmProfiles:
  runsKept: 100
  maxAge: 1h
  headroomPercent: 0
)");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->shmProfiles.runsKept, 100u);
  EXPECT_EQ(c->shmProfiles.maxAgeSeconds, 3600);
  EXPECT_EQ(c->shmProfiles.headroomPercent, 0u);
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
      {"webhookCertificate: {mode: auto}", "webhookCertificate.mode: \"auto\": expected operator or external"},
      {"webhookCertificate: {validity: 1h, renewBefore: 2h}", "renewBefore must be shorter than validity"},
      {"webhookCertificate: {dnsNames: a}", "webhookCertificate.dnsNames: expected a list"},
      {"webhookCertificate: {mode: operator, service: \"\"}", "a service, dnsNames or ipAddresses are needed"},
      {"webhookCertificate: {colour: red}", "webhookCertificate.colour: unknown setting"},
      {"webhookCertificate: {ipAddresses: [localhost]}", "webhookCertificate.ipAddresses: \"localhost\" is not an IP address"},
      {"shmProfiles: {runsKept: 0}", "shmProfiles.runsKept: \"0\": expected 1..100"},
      {"shmProfiles: {runsKept: 101}", "shmProfiles.runsKept: \"101\": expected 1..100"},
      {"shmProfiles: {headroomPercent: 1001}", "shmProfiles.headroomPercent: \"1001\": expected 0..1000"},
      {"shmProfiles: {headroomPercent: -5}", "shmProfiles.headroomPercent: \"-5\": expected 0..1000"},
      {"shmProfiles: {maxAge: 30m}", "shmProfiles.maxAge: \"30m\": expected at least 1h"},
      {"shmProfiles: {maxAge: 14d}", "shmProfiles.maxAge: \"14d\": expected a duration"},
      {"shmProfiles: {keep: 3}", "shmProfiles.keep: unknown setting"},
      {"shmProfiles: 10", "shmProfiles: expected a map"},
  };
  for (const auto& [yaml, message] : cases) {
    auto c = parseOperatorConfig(yaml);
    ASSERT_FALSE(c) << yaml;
    EXPECT_NE(c.error().message.find(message), std::string::npos) << yaml << ": " << c.error().message;
  }
}

}  // namespace
}  // namespace podshaper::op
