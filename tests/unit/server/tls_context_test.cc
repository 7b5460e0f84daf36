#include "server/tls_context.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/ssl.h>

#include <ctime>
#include <set>
#include <stdexcept>

#include "pki/openssl_util.h"
#include "pki/selfsigned.h"
#include "tests/unit/server/tls_test_client.h"

namespace podshaper::server {
namespace {

using Poll = CertificateReloader::PollResult;

class CertificateReloaderTest : public ::testing::Test {
 protected:
  void SetUp() override { make(cert(), key()); }

  static void make(const std::string& crt, const std::string& k) {
    auto written = pki::writeSelfSignedCert(crt, k, "test", {"localhost"}, 1);
    if (!written) throw std::runtime_error(written.error().message);
  }
  std::string cert() const { return dir_.file("tls.crt"); }
  std::string key() const { return dir_.file("tls.key"); }

  testkit::TempDir dir_;
};

TEST_F(CertificateReloaderTest, LoadsAndDescribesTheCertificate) {
  CertificateReloader reloader(cert(), key());
  auto loaded = reloader.load();
  ASSERT_TRUE(loaded) << loaded.error().message;
  ASSERT_NE(reloader.current(), nullptr);
  EXPECT_EQ(reloader.info().subject, "CN=test");
  EXPECT_EQ(reloader.info().sha256, testkit::pemFileSha256(cert()));
  EXPECT_GT(reloader.info().notAfterUnix, 0);
  EXPECT_EQ(reloader.poll(), Poll::unchanged);
  EXPECT_EQ(reloader.reloads(), 0u);
}

TEST_F(CertificateReloaderTest, LoadErrorsNameTheFileAndTheProblem) {
  struct Case {
    const char* description;
    std::string certPem, keyPem;
    const char* expected;
  };
  testkit::TempDir other;
  make(other.file("tls.crt"), other.file("tls.key"));
  std::string goodCert = testkit::readFile(cert());
  std::string goodKey = testkit::readFile(key());
  const Case cases[] = {
      {"empty certificate", "", goodKey, "holds no valid PEM certificate chain"},
      {"garbage certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
       goodKey, "holds no valid PEM certificate chain"},
      {"half a certificate", goodCert.substr(0, goodCert.size() / 2), goodKey,
       "holds no valid PEM certificate chain"},
      {"garbage key", goodCert, "not a key", "holds no readable unencrypted PEM private key"},
      {"another pair's key", goodCert, testkit::readFile(other.file("tls.key")),
       "does not match certificate"},
  };
  for (const auto& c : cases) {
    testkit::overwriteFile(dir_.file("case.crt"), c.certPem);
    testkit::overwriteFile(dir_.file("case.key"), c.keyPem);
    CertificateReloader reloader(dir_.file("case.crt"), dir_.file("case.key"));
    auto loaded = reloader.load();
    ASSERT_FALSE(loaded) << c.description;
    EXPECT_NE(loaded.error().message.find(c.expected), std::string::npos)
        << c.description << ": " << loaded.error().message;
    EXPECT_NE(loaded.error().message.find("case."), std::string::npos) << c.description;
  }
  CertificateReloader missing(dir_.file("nope.crt"), key());
  auto loaded = missing.load();
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().message.find("cannot read certificate file \"" + dir_.file("nope.crt")),
            std::string::npos)
      << loaded.error().message;
}

TEST_F(CertificateReloaderTest, TouchWithoutNewContentIsNotAReload) {
  CertificateReloader reloader(cert(), key());
  ASSERT_TRUE(reloader.load());
  testkit::replaceFile(cert(), testkit::readFile(cert()));  // new inode, same bytes
  EXPECT_EQ(reloader.poll(), Poll::unchanged);
  EXPECT_EQ(reloader.reloads(), 0u);
}

TEST_F(CertificateReloaderTest, NewPairSwapsTheContextAndKeepsTheOldOneAlive) {
  CertificateReloader reloader(cert(), key());
  ASSERT_TRUE(reloader.load());
  TlsContextPtr before = reloader.current();
  make(cert(), key());
  EXPECT_EQ(reloader.poll(), Poll::reloaded);
  EXPECT_EQ(reloader.reloads(), 1u);
  EXPECT_NE(reloader.current(), before);
  EXPECT_EQ(reloader.info().sha256, testkit::pemFileSha256(cert()));
  EXPECT_EQ(before.use_count(), 1);  // a connection holding it keeps it usable
  EXPECT_EQ(reloader.poll(), Poll::unchanged);
}

TEST_F(CertificateReloaderTest, FailedReloadKeepsServingAndRetriesUntilTheFilesLoad) {
  CertificateReloader reloader(cert(), key());
  ASSERT_TRUE(reloader.load());
  std::string serving = reloader.info().sha256;
  testkit::TempDir next;
  make(next.file("tls.crt"), next.file("tls.key"));

  testkit::replaceFile(cert(), testkit::readFile(next.file("tls.crt")));  // key not yet
  EXPECT_EQ(reloader.poll(), Poll::failed);
  EXPECT_EQ(reloader.poll(), Poll::failed);  // still failing, files re-read
  EXPECT_EQ(reloader.info().sha256, serving);

  testkit::replaceFile(key(), testkit::readFile(next.file("tls.key")));
  EXPECT_EQ(reloader.poll(), Poll::reloaded);
  EXPECT_EQ(reloader.info().sha256, testkit::pemFileSha256(next.file("tls.crt")));
}

TEST_F(CertificateReloaderTest, FilesGoingBackToTheServingPairEndTheRetry) {
  CertificateReloader reloader(cert(), key());
  ASSERT_TRUE(reloader.load());
  std::string good = testkit::readFile(cert());
  testkit::overwriteFile(cert(), "-----BEGIN CERT");
  EXPECT_EQ(reloader.poll(), Poll::failed);
  testkit::overwriteFile(cert(), good);
  EXPECT_EQ(reloader.poll(), Poll::unchanged);
  EXPECT_EQ(reloader.poll(), Poll::unchanged);
  EXPECT_EQ(reloader.reloads(), 0u);
}

TEST_F(CertificateReloaderTest, DeletedFilesAreAFailureNotACrash) {
  CertificateReloader reloader(cert(), key());
  ASSERT_TRUE(reloader.load());
  std::remove(key().c_str());
  EXPECT_EQ(reloader.poll(), Poll::failed);
  EXPECT_NE(reloader.current(), nullptr);
}

// "TLS 1.2+ only, modern ciphers", as the context itself says it.
TEST_F(CertificateReloaderTest, ContextIsTls12PlusWithModernCiphersAndNoResumption) {
  auto tls = makeServerTls(testkit::readFile(cert()), testkit::readFile(key()), cert(), key());
  ASSERT_TRUE(tls) << tls.error().message;
  SSL_CTX* ctx = tls->context->native_handle();
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx), TLS1_2_VERSION);
  std::uint64_t options = SSL_CTX_get_options(ctx);
  EXPECT_TRUE(options & SSL_OP_NO_RENEGOTIATION);
  EXPECT_TRUE(options & SSL_OP_NO_COMPRESSION);
  EXPECT_TRUE(options & SSL_OP_NO_TICKET);
  EXPECT_EQ(SSL_CTX_get_session_cache_mode(ctx), SSL_SESS_CACHE_OFF);
  EXPECT_EQ(SSL_CTX_get_num_tickets(ctx), 0u);
  EXPECT_EQ(SSL_CTX_get_security_level(ctx), 2);
  EXPECT_EQ(SSL_CTX_get_max_early_data(ctx), 0u);  // no 0-RTT: it can be replayed

  // Mozilla "intermediate" for TLS 1.2 (its DHE suites left out); TLS 1.3 all AEAD.
  const std::set<std::string> intermediate = {
      "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
      "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
      "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"};
  const std::set<std::string> tls13 = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                       "TLS_CHACHA20_POLY1305_SHA256"};
  std::set<std::string> offered12, offered13;
  STACK_OF(SSL_CIPHER)* ciphers = SSL_CTX_get_ciphers(ctx);
  for (int i = 0; i < sk_SSL_CIPHER_num(ciphers); ++i) {
    const SSL_CIPHER* c = sk_SSL_CIPHER_value(ciphers, i);
    (std::string(SSL_CIPHER_get_version(c)) == "TLSv1.3" ? offered13 : offered12)
        .insert(SSL_CIPHER_get_name(c));
  }
  EXPECT_EQ(offered12, intermediate);
  EXPECT_EQ(offered13, tls13);
}

TEST_F(CertificateReloaderTest, CertificateWithA1024BitRsaKeyIsRefusedSayingWhy) {
  pki::openssl::EvpPkeyPtr rsa(EVP_RSA_gen(1024));
  ASSERT_NE(rsa, nullptr);
  std::time_t now = std::time(nullptr);
  auto cert = pki::openssl::newCertificate(*rsa, "weak", nullptr, now - 60, now + 3600);
  ASSERT_TRUE(cert) << cert.error().message;
  ASSERT_GT(X509_sign(cert->get(), rsa.get(), EVP_sha256()), 0);
  auto certPem = pki::openssl::certificatePem(**cert);
  auto keyPem = pki::openssl::privateKeyPem(*rsa);
  ASSERT_TRUE(certPem && keyPem);
  auto tls = makeServerTls(*certPem, *keyPem, "weak.crt", "weak.key");
  ASSERT_FALSE(tls);
  EXPECT_NE(tls.error().message.find("certificate file \"weak.crt\" is too weak"),
            std::string::npos)
      << tls.error().message;
  EXPECT_NE(tls.error().message.find("2048 bits"), std::string::npos);
}

}  // namespace
}  // namespace podshaper::server
