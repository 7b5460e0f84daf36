#include "kube/tls.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

namespace podshaper::kube {
namespace {

struct Pem {
  std::string cert;
  std::string key;
};

std::string bioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

// A self-signed EC certificate and its key, made in memory.
Pem selfSigned(const std::string& commonName) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("prime256v1"), EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> x509(X509_new(), X509_free);
  ASN1_INTEGER_set(X509_get_serialNumber(x509.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(x509.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(x509.get()), 3600);
  X509_set_pubkey(x509.get(), key.get());
  X509_NAME* name = X509_get_subject_name(x509.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(commonName.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(x509.get(), name);
  X509_sign(x509.get(), key.get(), EVP_sha256());

  std::unique_ptr<BIO, decltype(&BIO_free)> certBio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_X509(certBio.get(), x509.get());
  std::unique_ptr<BIO, decltype(&BIO_free)> keyBio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_PrivateKey(keyBio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  return {bioText(certBio.get()), bioText(keyBio.get())};
}

TEST(CheckTlsConfig, Table) {
  const Pem a = selfSigned("a");
  const Pem b = selfSigned("b");
  struct Case {
    std::string description;
    ClientConfig config;
    std::string error;  // substring; empty: ok
  };
  auto with = [](std::string ca, std::string cert, std::string key) {
    ClientConfig c;
    c.server = "https://127.0.0.1:6443";
    c.caPem = std::move(ca);
    c.clientCertPem = std::move(cert);
    c.clientKeyPem = std::move(key);
    return c;
  };
  const Case cases[] = {
      {"nothing: system roots, no client certificate", with("", "", ""), ""},
      {"CA only", with(a.cert, "", ""), ""},
      {"CA bundle of two", with(a.cert + b.cert, "", ""), ""},
      {"CA and client certificate", with(a.cert, b.cert, b.key), ""},
      {"CA not PEM", with("CA-PEM", "", ""), "certificate authority data holds no PEM certificate"},
      {"CA PEM armour around garbage",
       with("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "", ""), "TLS: certificate authority:"},
      {"key of another certificate", with("", a.cert, b.key), "client key does not match the client certificate"},
      {"certificate without key", with("", a.cert, ""), "needs both"},
      {"key not PEM", with("", a.cert, "KEY"), "TLS: client key:"},
      {"certificate not PEM", with("", "CERT", a.key), "TLS: client certificate:"},
  };
  for (const auto& c : cases) {
    auto r = checkTlsConfig(c.config);
    if (c.error.empty()) {
      EXPECT_TRUE(r.ok()) << c.description << ": " << r.error().message;
    } else {
      ASSERT_FALSE(r.ok()) << c.description;
      EXPECT_NE(r.error().message.find(c.error), std::string::npos) << c.description << ": " << r.error().message;
    }
  }
}

}  // namespace
}  // namespace podshaper::kube
