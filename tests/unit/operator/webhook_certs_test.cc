// The operator's certificate reconcile against the fake API server: the Secret and the
// caBundle made, kept, renewed, and nothing written by a standby or when a read fails.
#include "operator/webhook_certs.h"

#include <gtest/gtest.h>

#include "base/base64.h"
#include "pki/certs.h"
#include "tests/unit/kube/black_hole.h"
#include "tests/unit/support/fake_api_server.h"

namespace podshaper::op {
namespace {

using nlohmann::json;

constexpr const char* kSecret = "/api/v1/namespaces/podshaper-system/secrets/podshaper-webhook-tls";
constexpr const char* kMwc = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/podshaper";

json mwc() {
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "MutatingWebhookConfiguration"},
          {"metadata", {{"name", "podshaper"}}},
          {"webhooks", {{{"name", "pods.podshaper.io"}, {"clientConfig", {{"service", {{"name", "podshaper-webhook"}}}}}}}}};
}

std::string field(const json& secret, const char* key) {
  auto decoded = base64Decode(secret["data"][key].get<std::string>());
  return decoded ? *decoded : "";
}

struct Fixture {
  fakes::FakeApiServer api;
  kube::Client client{kube::serverAt(api.url())};
  metrics::Registry metrics;
  bool leader = true;
  WebhookCertificateConfig config = [] {
    WebhookCertificateConfig c;
    c.managed = true;
    return c;
  }();
  WebhookCertificates certs{client, config, metrics, [this] { return leader; }};
};

TEST(WebhookCertificates, AFreshClusterGetsACaASigningCertificateAndTheCaBundle) {
  Fixture f;
  f.api.put(kMwc, mwc());
  auto done = f.certs.reconcile();
  ASSERT_TRUE(done) << done.error().message;
  EXPECT_TRUE(*done);
  auto secret = f.api.object(kSecret);
  ASSERT_TRUE(secret);
  EXPECT_EQ((*secret)["type"], "kubernetes.io/tls");
  const std::string cert = field(*secret, "tls.crt"), ca = field(*secret, "ca.crt");
  EXPECT_TRUE(*pki::signedBy(cert, ca));
  EXPECT_TRUE(*pki::keyMatches(cert, field(*secret, "tls.key")));
  EXPECT_TRUE(*pki::keyMatches(ca, field(*secret, "ca.key")));
  auto details = pki::inspectCertificate(cert);
  ASSERT_TRUE(details);
  EXPECT_EQ(details->dnsNames, f.config.sans());
  // The caBundle before the Secret: the API server trusts the CA before its certificate is served.
  EXPECT_EQ(f.api.writes(), (std::vector<std::string>{"PUT " + std::string(kMwc),
                                                       "POST /api/v1/namespaces/podshaper-system/secrets"}));
  EXPECT_EQ(f.api.object(kMwc)->at("webhooks")[0]["clientConfig"]["caBundle"], base64Encode(ca));
}

TEST(WebhookCertificates, ACheckOfGoodCertificatesWritesNothing) {
  Fixture f;
  f.api.put(kMwc, mwc());
  ASSERT_TRUE(f.certs.reconcile());
  const auto before = f.api.writes().size();
  auto again = f.certs.reconcile();
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE(*again);
  EXPECT_EQ(f.api.writes().size(), before);
}

TEST(WebhookCertificates, TheRenewAnnotationGetsANewServingCertificateFromTheSameCa) {
  Fixture f;
  f.api.put(kMwc, mwc());
  ASSERT_TRUE(f.certs.reconcile());
  json secret = *f.api.object(kSecret);
  const std::string oldCert = field(secret, "tls.crt"), ca = field(secret, "ca.crt");
  secret["metadata"]["annotations"][std::string(kRenewAnnotation)] = "now";
  f.api.put(kSecret, secret);
  auto renewed = f.certs.reconcile();
  ASSERT_TRUE(renewed) << renewed.error().message;
  secret = *f.api.object(kSecret);
  EXPECT_NE(field(secret, "tls.crt"), oldCert);
  EXPECT_EQ(field(secret, "ca.crt"), ca);
  EXPECT_TRUE(*pki::signedBy(field(secret, "tls.crt"), ca));
  EXPECT_FALSE(secret["metadata"].value("annotations", json::object()).contains(std::string(kRenewAnnotation)));
}

TEST(WebhookCertificates, AServingCertificateThatDoesNotParseIsIssuedAgain) {
  Fixture f;
  f.api.put(kMwc, mwc());
  ASSERT_TRUE(f.certs.reconcile());
  json secret = *f.api.object(kSecret);
  secret["data"]["tls.crt"] = base64Encode("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n");
  f.api.put(kSecret, secret);
  ASSERT_TRUE(f.certs.reconcile());
  secret = *f.api.object(kSecret);
  EXPECT_TRUE(*pki::signedBy(field(secret, "tls.crt"), field(secret, "ca.crt")));
}

TEST(WebhookCertificates, AStandbyWritesNothing) {
  Fixture f;
  f.leader = false;
  f.api.put(kMwc, mwc());
  auto done = f.certs.reconcile();
  ASSERT_TRUE(done) << done.error().message;
  EXPECT_FALSE(*done);
  EXPECT_TRUE(f.api.writes().empty());
  EXPECT_FALSE(f.api.object(kSecret));
}

TEST(WebhookCertificates, FailuresNameWhatCouldNotBeReadOrWritten) {
  Fixture f;
  auto noMwc = f.certs.reconcile();  // no MutatingWebhookConfiguration installed
  ASSERT_FALSE(noMwc);
  EXPECT_NE(noMwc.error().message.find("reading MutatingWebhookConfiguration podshaper"), std::string::npos)
      << noMwc.error().message;
  EXPECT_TRUE(f.api.writes().empty());

  f.api.put(kMwc, mwc());
  f.api.fail("GET", kSecret, 403, "Forbidden");
  auto unreadable = f.certs.reconcile();
  ASSERT_FALSE(unreadable);
  EXPECT_NE(unreadable.error().message.find("reading Secret podshaper-system/podshaper-webhook-tls"),
            std::string::npos)
      << unreadable.error().message;
  EXPECT_TRUE(f.api.writes().empty());

  f.api.fail("POST", "/api/v1/namespaces/podshaper-system/secrets", 500, "InternalError");
  auto unwritten = f.certs.reconcile();
  ASSERT_FALSE(unwritten);
  EXPECT_NE(unwritten.error().message.find("writing Secret podshaper-system/podshaper-webhook-tls"),
            std::string::npos)
      << unwritten.error().message;
  // The next check makes it, with a CA of its own: the failed write's CA was never stored,
  // and the caBundle is written for the new one before the Secret.
  auto retried = f.certs.reconcile();
  ASSERT_TRUE(retried) << retried.error().message;
  ASSERT_TRUE(f.api.object(kSecret));
  EXPECT_EQ(f.api.object(kMwc)->at("webhooks")[0]["clientConfig"]["caBundle"],
            base64Encode(field(*f.api.object(kSecret), "ca.crt")));
}

}  // namespace
}  // namespace podshaper::op
