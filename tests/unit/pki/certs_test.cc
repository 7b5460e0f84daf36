#include "pki/certs.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "pki/openssl_util.h"
#include "server/https_server.h"
#include "tests/unit/server/tls_test_client.h"

namespace podshaper::pki {
namespace {

constexpr long long kDay = 24 * 60 * 60;
constexpr long long kBackdate = 5 * 60;
constexpr const char* kCaName = "podshaper-webhook-ca";

KeyPair makeCa(const std::string& cn = kCaName, long long validity = 365 * kDay) {
  auto ca = makeCertificateAuthority(cn, validity);
  if (!ca) throw std::runtime_error(ca.error().message);
  return *ca;
}

KeyPair issue(const KeyPair& ca, const std::vector<std::string>& sans,
              long long validity = 30 * kDay) {
  auto leaf = issueServingCertificate(ca, sans, validity);
  if (!leaf) throw std::runtime_error(leaf.error().message);
  return *leaf;
}

CertificateDetails inspect(const std::string& pem) {
  auto details = inspectCertificate(pem);
  if (!details) throw std::runtime_error(details.error().message);
  return *details;
}

pki::openssl::X509Ptr parse(const std::string& pem) {
  auto cert = pki::openssl::readPemCertificate(pem);
  if (!cert) throw std::runtime_error("no certificate in the PEM");
  return cert;
}

bool isCritical(X509& cert, int nid) {
  int index = X509_get_ext_by_NID(&cert, nid, -1);
  return index >= 0 && X509_EXTENSION_get_critical(X509_get_ext(&cert, index)) == 1;
}

// Wraps any bytes in CERTIFICATE armour, as a corrupted Secret would hold them.
std::string certificateArmour(const std::string& der) {
  pki::openssl::BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio(bio.get(), "CERTIFICATE", "", reinterpret_cast<const unsigned char*>(der.data()),
                static_cast<long>(der.size()));
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

std::string der(const std::string& pem) {
  auto cert = parse(pem);
  unsigned char* raw = nullptr;
  int size = i2d_X509(cert.get(), &raw);
  std::unique_ptr<unsigned char, decltype([](unsigned char* p) { OPENSSL_free(p); })> owned(raw);
  if (size <= 0) throw std::runtime_error("cannot encode DER");
  return std::string(reinterpret_cast<const char*>(owned.get()), static_cast<std::size_t>(size));
}

// A CA whose validity ended yesterday, built from the same steps as ours.
KeyPair expiredCa() {
  auto key = pki::openssl::makeP256Key();
  std::time_t now = std::time(nullptr);
  auto cert = pki::openssl::newCertificate(**key, "expired-ca", nullptr, now - 2 * kDay, now - kDay);
  if (!cert || !pki::openssl::addExtension(**cert, nullptr, NID_basic_constraints, "critical,CA:TRUE") ||
      !pki::openssl::addExtension(**cert, nullptr, NID_key_usage, "critical,keyCertSign") ||
      X509_sign(cert->get(), key->get(), EVP_sha256()) <= 0) {
    throw std::runtime_error("cannot build the expired CA");
  }
  return {*pki::openssl::certificatePem(**cert), *pki::openssl::privateKeyPem(**key)};
}

TEST(CertificateAuthorityTest, IsASelfSignedP256CaWithTheNameAndValidityAsked) {
  long long now = std::time(nullptr);
  KeyPair ca = makeCa(kCaName, 2 * 365 * kDay);
  EXPECT_EQ(ca.keyPem.rfind("-----BEGIN PRIVATE KEY-----\n", 0), 0u) << "PKCS#8, unencrypted";

  CertificateDetails info = inspect(ca.certPem);
  EXPECT_TRUE(info.isCA);
  EXPECT_EQ(info.subjectCommonName, kCaName);
  EXPECT_EQ(info.issuerCommonName, kCaName);
  EXPECT_NEAR(info.notBefore, now - kBackdate, 5);
  EXPECT_NEAR(info.notAfter, now + 2 * 365 * kDay, 5);
  EXPECT_TRUE(info.dnsNames.empty());
  EXPECT_TRUE(info.ipAddresses.empty());
  EXPECT_TRUE(*signedBy(ca.certPem, ca.certPem));
  EXPECT_TRUE(*keyMatches(ca.certPem, ca.keyPem));

  auto cert = parse(ca.certPem);
  EVP_PKEY* key = X509_get0_pubkey(cert.get());
  EXPECT_EQ(EVP_PKEY_get_base_id(key), EVP_PKEY_EC);
  EXPECT_EQ(EVP_PKEY_get_bits(key), 256);
  EXPECT_EQ(X509_get_version(cert.get()), 2);
  EXPECT_EQ(X509_check_ca(cert.get()), 1);
  EXPECT_TRUE(isCritical(*cert, NID_basic_constraints));
  EXPECT_EQ(X509_get_pathlen(cert.get()), 0);
  EXPECT_TRUE(isCritical(*cert, NID_key_usage));
  EXPECT_EQ(X509_get_key_usage(cert.get()),
            static_cast<std::uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  EXPECT_NE(X509_get0_subject_key_id(cert.get()), nullptr);
  EXPECT_EQ(pki::openssl::serialHex(*cert).size(), 34u) << "0x01 then 128 random bits";
}

TEST(CertificateAuthorityTest, EachCallMakesANewKeyAndSerial) {
  KeyPair a = makeCa(), b = makeCa();
  EXPECT_NE(a.keyPem, b.keyPem);
  EXPECT_NE(pki::openssl::serialHex(*parse(a.certPem)), pki::openssl::serialHex(*parse(b.certPem)));
  EXPECT_FALSE(*keyMatches(a.certPem, b.keyPem));
  EXPECT_FALSE(*signedBy(a.certPem, b.certPem));
}

TEST(CertificateAuthorityTest, CommonNameLimitIsCountedInCharacters) {
  std::string accents;
  for (int i = 0; i < 64; ++i) accents += "\xc3\xa9";  // 64 × 'é', 128 bytes
  EXPECT_EQ(inspect(makeCa(accents).certPem).subjectCommonName, accents);
}

TEST(CertificateAuthorityTest, BadArgumentsAreErrorsThatSayWhy) {
  struct Case {
    const char* description;
    std::string commonName;
    long long validity;
    std::string expected;
  };
  const Case cases[] = {
      {"empty name", "", kDay, "CA: the common name is empty"},
      {"name over 64 characters", std::string(65, 'x'), kDay, "is longer than 64 characters"},
      {"zero validity", "ca", 0, "CA: validity must be from 1 second to 100 years, got 0 seconds"},
      {"negative validity", "ca", -kDay, "got -86400 seconds"},
      {"over 100 years", "ca", 101 * 366 * kDay, "validity must be from 1 second to 100 years"},
  };
  for (const Case& c : cases) {
    auto ca = makeCertificateAuthority(c.commonName, c.validity);
    ASSERT_FALSE(ca) << c.description;
    EXPECT_NE(ca.error().message.find(c.expected), std::string::npos)
        << c.description << ": " << ca.error().message;
  }
}

TEST(CertificateIssueTest, ServingCertificateHasTheSansAndIsSignedByTheCa) {
  long long now = std::time(nullptr);
  KeyPair ca = makeCa(), other = makeCa("other-ca");
  KeyPair leaf = issue(ca,
                       {"podshaper-webhook.podshaper.svc", "10.0.0.7",
                        "podshaper-webhook.podshaper.svc.cluster.local", "0:0::1", "127.0.0.1"},
                       90 * kDay);
  EXPECT_EQ(leaf.keyPem.rfind("-----BEGIN PRIVATE KEY-----\n", 0), 0u);

  CertificateDetails info = inspect(leaf.certPem);
  EXPECT_FALSE(info.isCA);
  EXPECT_EQ(info.subjectCommonName, "podshaper-webhook.podshaper.svc");
  EXPECT_EQ(info.issuerCommonName, kCaName);
  EXPECT_EQ(info.dnsNames,
            (std::vector<std::string>{"podshaper-webhook.podshaper.svc",
                                      "podshaper-webhook.podshaper.svc.cluster.local"}));
  EXPECT_EQ(info.ipAddresses, (std::vector<std::string>{"10.0.0.7", "::1", "127.0.0.1"}));
  EXPECT_NEAR(info.notBefore, now - kBackdate, 5);
  EXPECT_NEAR(info.notAfter, now + 90 * kDay, 5);

  EXPECT_TRUE(*signedBy(leaf.certPem, ca.certPem));
  EXPECT_FALSE(*signedBy(leaf.certPem, other.certPem));
  EXPECT_FALSE(*signedBy(leaf.certPem, leaf.certPem));
  EXPECT_TRUE(*keyMatches(leaf.certPem, leaf.keyPem));
  EXPECT_FALSE(*keyMatches(leaf.certPem, ca.keyPem));
  EXPECT_FALSE(*keyMatches(leaf.certPem, issue(ca, {"x"}).keyPem));

  auto cert = parse(leaf.certPem);
  auto caCert = parse(ca.certPem);
  EVP_PKEY* key = X509_get0_pubkey(cert.get());
  EXPECT_EQ(EVP_PKEY_get_base_id(key), EVP_PKEY_EC);
  EXPECT_EQ(EVP_PKEY_get_bits(key), 256);
  EXPECT_EQ(X509_check_issued(caCert.get(), cert.get()), X509_V_OK);
  EXPECT_NE(X509_get_extension_flags(cert.get()) & EXFLAG_BCONS, 0u) << "CA:FALSE is explicit";
  EXPECT_EQ(X509_check_ca(cert.get()), 0);
  EXPECT_TRUE(isCritical(*cert, NID_key_usage));
  EXPECT_EQ(X509_get_key_usage(cert.get()), static_cast<std::uint32_t>(KU_DIGITAL_SIGNATURE));
  EXPECT_EQ(X509_get_extended_key_usage(cert.get()), static_cast<std::uint32_t>(XKU_SSL_SERVER));
  ASSERT_NE(X509_get0_authority_key_id(cert.get()), nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(cert.get()),
                                  X509_get0_subject_key_id(caCert.get())),
            0);
  EXPECT_EQ(pki::openssl::serialHex(*cert).size(), 34u);

  // "The first certificate in the PEM": a Secret's tls.crt may carry the chain,
  // and a key block in front is skipped.
  std::string bundle = leaf.keyPem + leaf.certPem + ca.certPem;
  EXPECT_EQ(inspect(bundle).subjectCommonName, "podshaper-webhook.podshaper.svc");
  EXPECT_TRUE(*signedBy(bundle, ca.certPem));
}

TEST(CertificateIssueTest, EachCallMakesANewKeyAndSerial) {
  KeyPair ca = makeCa();
  KeyPair a = issue(ca, {"x"}), b = issue(ca, {"x"});
  EXPECT_NE(a.keyPem, b.keyPem);
  EXPECT_NE(pki::openssl::serialHex(*parse(a.certPem)), pki::openssl::serialHex(*parse(b.certPem)));
}

TEST(CertificateIssueTest, CommonNameIsTheFirstDnsNameOrTheDefault) {
  struct Case {
    const char* description;
    std::vector<std::string> sans;
    std::string expected;
  };
  std::string longName = std::string(60, 'a') + ".podshaper.svc";  // 74 characters
  const Case cases[] = {
      {"IP before the name", {"10.0.0.1", "a.example", "b.example"}, "a.example"},
      {"only IPs", {"10.0.0.1", "::1"}, "podshaper-webhook"},
      {"first name too long for a CN", {longName, "short.svc"}, "podshaper-webhook"},
      {"wildcard", {"*.podshaper.svc"}, "*.podshaper.svc"},
  };
  KeyPair ca = makeCa();
  for (const Case& c : cases) {
    CertificateDetails info = inspect(issue(ca, c.sans).certPem);
    EXPECT_EQ(info.subjectCommonName, c.expected) << c.description;
  }
  EXPECT_EQ(inspect(issue(ca, {longName}).certPem).dnsNames, std::vector<std::string>{longName})
      << "a name too long for the CN is still a SAN";
}

TEST(CertificateIssueTest, ValidityIsClippedAtTheCaNotAfter) {
  long long now = std::time(nullptr);
  KeyPair shortCa = makeCa(kCaName, 3600);
  CertificateDetails clipped = inspect(issue(shortCa, {"x"}, 365 * kDay).certPem);
  EXPECT_EQ(clipped.notAfter, inspect(shortCa.certPem).notAfter);
  EXPECT_NEAR(clipped.notBefore, now - kBackdate, 5);

  CertificateDetails inside = inspect(issue(makeCa(), {"x"}, 3600).certPem);
  EXPECT_NEAR(inside.notAfter, now + 3600, 5);
}

TEST(CertificateIssueTest, BadInputsAreErrorsThatSayWhy) {
  KeyPair ca = makeCa(), other = makeCa("other-ca");
  KeyPair leaf = issue(ca, {"x"});
  KeyPair expired = expiredCa();
  struct Case {
    const char* description;
    KeyPair ca;
    std::vector<std::string> sans;
    long long validity;
    std::string expected;
  };
  const Case cases[] = {
      {"empty SAN", ca, {"a.svc", ""}, kDay, "serving certificate: SAN \"\" is empty"},
      {"comma smuggling a second SAN", ca, {"a.svc,IP:1.2.3.4"}, kDay,
       "serving certificate: SAN \"a.svc,IP:1.2.3.4\" is neither an IP address nor a DNS name"},
      {"space in a SAN", ca, {"a b"}, kDay, "SAN \"a b\" is neither"},
      {"IPv6 with a zone", ca, {"fe80::1%eth0"}, kDay, "SAN \"fe80::1%eth0\" is neither"},
      {"no SANs", ca, {}, kDay, "serving certificate: no SANs given"},
      {"zero validity", ca, {"x"}, 0, "serving certificate: validity must be from 1 second"},
      {"garbage CA certificate", {"garbage", ca.keyPem}, {"x"}, kDay, "CA certificate: not PEM"},
      {"empty CA key", {ca.certPem, ""}, {"x"}, kDay, "CA key: not PEM"},
      {"a certificate as the CA key", {ca.certPem, ca.certPem}, {"x"}, kDay,
       "CA key: no readable unencrypted PEM private key"},
      {"another CA's key", {ca.certPem, other.keyPem}, {"x"}, kDay,
       "CA key does not match the CA certificate \"CN=podshaper-webhook-ca\""},
      {"a serving certificate as the CA", leaf, {"x"}, kDay,
       "CA certificate \"CN=x\" is not a CA"},
      {"an expired CA", expired, {"x"}, kDay, "CA certificate \"CN=expired-ca\" expired at "},
  };
  for (const Case& c : cases) {
    auto issued = issueServingCertificate(c.ca, c.sans, c.validity);
    ASSERT_FALSE(issued) << c.description;
    EXPECT_NE(issued.error().message.find(c.expected), std::string::npos)
        << c.description << ": " << issued.error().message;
    EXPECT_EQ(ERR_peek_error(), 0u) << c.description << ": OpenSSL errors left behind";
  }
}

TEST(CertificateGarbageTest, GarbagePemIsAnErrorNeverACrash) {
  KeyPair ca = makeCa();
  KeyPair leaf = issue(ca, {"x"});
  const std::string garbage[] = {
      "",
      "not PEM at all",
      std::string("\0\x01\xff-----BEGIN", 13),
      "-----BEGIN CERTIFICATE-----\n",
      "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n",
      "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
      certificateArmour("AAAA"),
      certificateArmour(std::string(300, '\xff')),
      certificateArmour(der(leaf.certPem).substr(0, 200)),
      leaf.certPem.substr(0, leaf.certPem.size() / 2),
      "-----BEGIN CERTIFICATE-----\n" + std::string(1 << 20, 'A') + "\n-----END CERTIFICATE-----\n",
  };
  auto expectError = [](const auto& result, const std::string& prefix, std::size_t i) {
    ASSERT_FALSE(result) << "garbage #" << i;
    EXPECT_EQ(result.error().message.rfind(prefix, 0), 0u)
        << "garbage #" << i << ": " << result.error().message;
    EXPECT_EQ(ERR_peek_error(), 0u) << "garbage #" << i << ": OpenSSL errors left behind";
  };
  for (std::size_t i = 0; i < std::size(garbage); ++i) {
    const std::string& g = garbage[i];
    expectError(inspectCertificate(g), "certificate: ", i);
    expectError(signedBy(g, ca.certPem), "certificate: ", i);
    expectError(signedBy(leaf.certPem, g), "CA certificate: ", i);
    expectError(keyMatches(g, leaf.keyPem), "certificate: ", i);
    expectError(keyMatches(leaf.certPem, g), "private key: ", i);
    expectError(issueServingCertificate({g, ca.keyPem}, {"x"}, kDay), "CA certificate: ", i);
    expectError(issueServingCertificate({ca.certPem, g}, {"x"}, kDay), "CA key: ", i);
  }
  // The right PEM in the wrong place.
  expectError(inspectCertificate(leaf.keyPem), "certificate: no readable PEM certificate", 100);
  expectError(keyMatches(leaf.certPem, leaf.certPem), "private key: no readable", 101);
}

// Every single-byte corruption of a CA and of a serving certificate: each call
// answers (a value or an error), and a tampered certificate is never "signed by".
TEST(CertificateGarbageTest, CorruptedCertificatesAreAnsweredAndNeverVerify) {
  KeyPair ca = makeCa();
  KeyPair leaf = issue(ca, {"podshaper-webhook.podshaper.svc", "10.0.0.1"});
  std::string leafDer = der(leaf.certPem), caDer = der(ca.certPem);
  int readable = 0;
  for (std::size_t i = 0; i < leafDer.size(); ++i) {
    std::string corrupt = leafDer;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0xff);
    std::string pem = certificateArmour(corrupt);
    if (inspectCertificate(pem)) ++readable;
    auto signedByCa = signedBy(pem, ca.certPem);
    EXPECT_FALSE(signedByCa && *signedByCa) << "byte " << i;
    (void)keyMatches(pem, leaf.keyPem);
    EXPECT_EQ(ERR_peek_error(), 0u) << "byte " << i;
  }
  EXPECT_GT(readable, 0) << "some corruptions (in the signature, a name) still parse";
  for (std::size_t i = 0; i < caDer.size(); ++i) {
    std::string corrupt = caDer;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0xff);
    (void)issueServingCertificate({certificateArmour(corrupt), ca.keyPem}, {"x"}, kDay);
    (void)signedBy(leaf.certPem, certificateArmour(corrupt));
    EXPECT_EQ(ERR_peek_error(), 0u) << "byte " << i;
  }
}

// The certificates as the kube-apiserver meets them: the repo's HTTPS server
// serves the leaf, and a client that trusts only the CA verifies it by IP and
// by name, while a client trusting another CA refuses it.
TEST(CertificateTlsTest, HttpsServerWithTheServingCertificateVerifiesAgainstOnlyTheCa) {
  KeyPair ca = makeCa(), other = makeCa("other-ca");
  KeyPair leaf = issue(ca, {"localhost", "127.0.0.1"}, kDay);
  server::testkit::TempDir dir;
  server::testkit::overwriteFile(dir.file("tls.crt"), leaf.certPem);
  server::testkit::overwriteFile(dir.file("tls.key"), leaf.keyPem);
  server::testkit::overwriteFile(dir.file("ca.crt"), ca.certPem);
  server::testkit::overwriteFile(dir.file("other-ca.crt"), other.certPem);

  server::HttpsServer server({.host = "127.0.0.1",
                      .port = 0,
                      .certFile = dir.file("tls.crt"),
                      .keyFile = dir.file("tls.key")},
                     nullptr);
  server.route("GET", "/healthz", [](const server::Request&) { return server::Response{.body = "ok\n"}; });
  auto started = server.start();
  ASSERT_TRUE(started) << started.error().message;

  server::testkit::TlsTestClient byIp({.caFile = dir.file("ca.crt"), .verifyHost = "127.0.0.1"});
  auto connected = byIp.connect(server.boundPort());
  ASSERT_TRUE(connected) << connected.error().message;
  auto reply = byIp.request("GET", "/healthz");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(byIp.peerCertificateSha256(), pki::openssl::certificateSha256(*parse(leaf.certPem)));

  server::testkit::TlsTestClient byName({.caFile = dir.file("ca.crt"), .verifyHost = "localhost"});
  auto byNameConnected = byName.connect(server.boundPort());
  EXPECT_TRUE(byNameConnected) << byNameConnected.error().message;

  server::testkit::TlsTestClient otherCa({.caFile = dir.file("other-ca.crt"), .verifyHost = "127.0.0.1"});
  auto refused = otherCa.connect(server.boundPort());
  ASSERT_FALSE(refused) << "a client trusting another CA must refuse the certificate";
  EXPECT_NE(refused.error().message.find("certificate verify failed"), std::string::npos)
      << refused.error().message;

  server::testkit::TlsTestClient wrongIp({.caFile = dir.file("ca.crt"), .verifyHost = "10.0.0.1"});
  auto wrongIpConnected = wrongIp.connect(server.boundPort());
  EXPECT_FALSE(wrongIpConnected) << "10.0.0.1 is not among the SANs";
}

}  // namespace
}  // namespace podshaper::pki
