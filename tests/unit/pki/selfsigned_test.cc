#include "pki/selfsigned.h"

#include <gtest/gtest.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <ctime>

#include "pki/openssl_util.h"
#include "tests/unit/server/tls_test_client.h"

namespace podshaper::pki {
namespace {

// The SAN entries as "DNS:x" / "IP:1.2.3.4" strings.
std::vector<std::string> subjectAltNames(X509& cert) {
  std::vector<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(&cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS) {
      out.push_back("DNS:" + std::string(reinterpret_cast<const char*>(
                                 ASN1_STRING_get0_data(name->d.dNSName))));
    } else if (name->type == GEN_IPADD) {
      const unsigned char* ip = ASN1_STRING_get0_data(name->d.iPAddress);
      if (ASN1_STRING_length(name->d.iPAddress) == 4) {
        out.push_back("IP:" + std::to_string(ip[0]) + "." + std::to_string(ip[1]) + "." +
                      std::to_string(ip[2]) + "." + std::to_string(ip[3]));
      } else {
        out.push_back("IP:v6");
      }
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

TEST(SelfSignedTest, WritesAMatchingP256KeyAndAV3CertificateWithSans) {
  server::testkit::TempDir dir;
  auto written = writeSelfSignedCert(dir.file("tls.crt"), dir.file("tls.key"),
                                     "podshaper-webhook.podshaper.svc",
                                     {"podshaper-webhook.podshaper.svc", "10.0.0.7", "::1"}, 30);
  ASSERT_TRUE(written) << written.error().message;

  auto cert = pki::openssl::readPemCertificate(server::testkit::readFile(dir.file("tls.crt")));
  auto key = pki::openssl::readPemPrivateKey(server::testkit::readFile(dir.file("tls.key")));
  ASSERT_TRUE(cert && key);
  EXPECT_EQ(X509_check_private_key(cert.get(), key.get()), 1);
  EXPECT_EQ(EVP_PKEY_get_base_id(key.get()), EVP_PKEY_EC);
  EXPECT_EQ(EVP_PKEY_get_bits(key.get()), 256);
  EXPECT_EQ(X509_get_version(cert.get()), 2);
  EXPECT_EQ(pki::openssl::subjectText(*cert), "CN=podshaper-webhook.podshaper.svc");
  EXPECT_EQ(X509_verify(cert.get(), key.get()), 1);  // self-signed
  EXPECT_EQ(subjectAltNames(*cert),
            (std::vector<std::string>{"DNS:podshaper-webhook.podshaper.svc", "IP:10.0.0.7",
                                      "IP:v6"}));
  EXPECT_EQ(X509_get_extended_key_usage(cert.get()) & XKU_SSL_SERVER, XKU_SSL_SERVER);
  EXPECT_GE(pki::openssl::serialHex(*cert).size(), 30u);

  auto notAfter = pki::openssl::notAfterUnix(*cert);
  ASSERT_TRUE(notAfter);
  double days = static_cast<double>(*notAfter - std::time(nullptr)) / 86400;
  EXPECT_NEAR(days, 30, 0.01);

  struct stat st {};
  ASSERT_EQ(::stat(dir.file("tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(SelfSignedTest, EachCallMakesANewKeyAndSerial) {
  server::testkit::TempDir dir;
  ASSERT_TRUE(writeSelfSignedCert(dir.file("a.crt"), dir.file("a.key"), "x", {}, 1));
  ASSERT_TRUE(writeSelfSignedCert(dir.file("b.crt"), dir.file("b.key"), "x", {}, 1));
  EXPECT_NE(server::testkit::readFile(dir.file("a.key")), server::testkit::readFile(dir.file("b.key")));
  auto a = pki::openssl::readPemCertificate(server::testkit::readFile(dir.file("a.crt")));
  auto b = pki::openssl::readPemCertificate(server::testkit::readFile(dir.file("b.crt")));
  EXPECT_NE(pki::openssl::serialHex(*a), pki::openssl::serialHex(*b));
  EXPECT_EQ(subjectAltNames(*a), std::vector<std::string>{"DNS:x"});  // CN when no SANs
}

TEST(SelfSignedTest, BadInputsAreErrors) {
  server::testkit::TempDir dir;
  std::string crt = dir.file("t.crt"), key = dir.file("t.key");
  EXPECT_FALSE(writeSelfSignedCert(crt, key, "", {}, 1));
  EXPECT_FALSE(writeSelfSignedCert(crt, key, "x", {}, 0));
  EXPECT_FALSE(writeSelfSignedCert(crt, key, "x", {"a,b"}, 1));
  auto unwritable = writeSelfSignedCert(dir.file("no/such/dir/t.crt"), key, "x", {}, 1);
  ASSERT_FALSE(unwritable);
  EXPECT_NE(unwritable.error().message.find("no/such/dir"), std::string::npos)
      << unwritable.error().message;
}

}  // namespace
}  // namespace podshaper::pki
