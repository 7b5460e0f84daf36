#include "pki/certs.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <utility>

#include "pki/openssl_util.h"

namespace podshaper::pki {

namespace {

constexpr std::time_t kBackdateSeconds = 5 * 60;  // clock skew between the operator and clients
constexpr long long kMaxValiditySeconds = 100LL * 36525 * 864;  // 100 years of 365.25 days
constexpr std::size_t kMaxCommonNameCharacters = 64;           // RFC 5280 ub-common-name
constexpr const char* kDefaultCommonName = "podshaper-webhook";

Error failed(const std::string& what, const Error& e) { return Error{what + ": " + e.message}; }

std::size_t utf8Characters(const std::string& s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xc0) != 0x80; }));
}

Result<void> checkValidity(const std::string& what, long long seconds) {
  if (seconds <= 0 || seconds > kMaxValiditySeconds) {
    return Error{what + ": validity must be from 1 second to 100 years, got " +
                 std::to_string(seconds) + " seconds"};
  }
  return {};
}

Result<openssl::X509Ptr> parseCertificate(const std::string& pem, const std::string& what) {
  if (pem.find("-----BEGIN ") == std::string::npos) return Error{what + ": not PEM"};
  openssl::X509Ptr cert = openssl::readPemCertificate(pem);
  if (!cert) {
    return Error{what + ": no readable PEM certificate (" + openssl::takeErrors() + ")"};
  }
  return cert;
}

Result<openssl::EvpPkeyPtr> parsePrivateKey(const std::string& pem, const std::string& what) {
  if (pem.find("-----BEGIN ") == std::string::npos) return Error{what + ": not PEM"};
  openssl::EvpPkeyPtr key = openssl::readPemPrivateKey(pem);
  if (!key) {
    return Error{what + ": no readable unencrypted PEM private key (" + openssl::takeErrors() +
                 ")"};
  }
  return key;
}

// The certificate's public key, which may itself be garbage in a certificate
// that otherwise parses.
Result<EVP_PKEY*> publicKey(const X509& cert, const std::string& what) {
  EVP_PKEY* key = X509_get0_pubkey(&cert);
  if (key == nullptr) {
    return Error{what + ": its public key does not parse (" + openssl::takeErrors() + ")"};
  }
  return key;
}

// The first CN of `name` as UTF-8; empty when there is none.
Result<std::string> commonName(const X509_NAME& name, const std::string& what) {
  int index = X509_NAME_get_index_by_NID(&name, NID_commonName, -1);
  if (index < 0) return std::string();
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(&name, index));
  unsigned char* raw = nullptr;
  int size = ASN1_STRING_to_UTF8(&raw, data);
  std::unique_ptr<unsigned char, decltype([](unsigned char* p) { OPENSSL_free(p); })> utf8(raw);
  if (size < 0) {
    ERR_clear_error();
    return Error{what + ": its CN is not a string"};
  }
  return std::string(reinterpret_cast<const char*>(utf8.get()), static_cast<std::size_t>(size));
}

// Splits the subjectAltName into DNS names and IP addresses; other kinds
// (email, URI) are not ours to judge and are left out.
Result<void> readSubjectAltNames(const X509& cert, CertificateDetails& details) {
  int critical = 0;
  openssl::GeneralNamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(&cert, NID_subject_alt_name, &critical, nullptr)));
  if (!names) {
    ERR_clear_error();
    if (critical == -1) return {};  // no subjectAltName
    return Error{"certificate: its subjectAltName does not parse or appears twice"};
  }
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type == GEN_DNS) {
      const ASN1_IA5STRING* dns = name->d.dNSName;
      details.dnsNames.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                                    static_cast<std::size_t>(ASN1_STRING_length(dns)));
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      int size = ASN1_STRING_length(ip);
      std::array<char, INET6_ADDRSTRLEN> text{};
      if ((size != 4 && size != 16) ||
          inet_ntop(size == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text.data(),
                    static_cast<socklen_t>(text.size())) == nullptr) {
        return Error{"certificate: an IP address SAN of " + std::to_string(size) +
                     " bytes is neither IPv4 nor IPv6"};
      }
      details.ipAddresses.emplace_back(text.data());
    }
  }
  return {};
}

// Signs, then encodes both halves.
Result<KeyPair> finish(X509& cert, EVP_PKEY& signer, const EVP_PKEY& key,
                       const std::string& what) {
  if (X509_sign(&cert, &signer, EVP_sha256()) <= 0) {
    return Error{what + ": cannot sign: " + openssl::takeErrors()};
  }
  auto certPem = openssl::certificatePem(cert);
  if (!certPem) return failed(what, certPem.error());
  auto keyPem = openssl::privateKeyPem(key);
  if (!keyPem) return failed(what, keyPem.error());
  return KeyPair{std::move(*certPem), std::move(*keyPem)};
}

Result<void> addExtensions(X509& cert, X509* issuer,
                           const std::vector<std::pair<int, std::string>>& extensions,
                           const std::string& what) {
  for (const auto& [nid, value] : extensions) {
    auto added = openssl::addExtension(cert, issuer, nid, value);
    if (!added) return failed(what, added.error());
  }
  return {};
}

}  // namespace

Result<KeyPair> makeCertificateAuthority(const std::string& commonName, long long validitySeconds) {
  const std::string what = "CA";
  ERR_clear_error();
  if (commonName.empty()) return Error{what + ": the common name is empty"};
  if (utf8Characters(commonName) > kMaxCommonNameCharacters) {
    return Error{what + ": the common name \"" + commonName + "\" is longer than " +
                 std::to_string(kMaxCommonNameCharacters) + " characters"};
  }
  if (auto r = checkValidity(what, validitySeconds); !r) return r.error();

  auto key = openssl::makeP256Key();
  if (!key) return failed(what, key.error());
  std::time_t now = std::time(nullptr);
  auto cert = openssl::newCertificate(**key, commonName, nullptr, now - kBackdateSeconds,
                                      now + static_cast<std::time_t>(validitySeconds));
  if (!cert) return failed(what, cert.error());
  auto added = addExtensions(**cert, nullptr,
                             {
                                 {NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                                 {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                 {NID_subject_key_identifier, "hash"},
                             },
                             what);
  if (!added) return added.error();
  return finish(**cert, **key, **key, what);
}

Result<KeyPair> issueServingCertificate(const KeyPair& ca, const std::vector<std::string>& sans,
                                        long long validitySeconds) {
  const std::string what = "serving certificate";
  ERR_clear_error();
  if (sans.empty()) {
    return Error{what + ": no SANs given (clients check the SANs, not the CN)"};
  }
  auto sanValue = openssl::subjectAltNameValue(sans);
  if (!sanValue) return failed(what, sanValue.error());
  if (auto r = checkValidity(what, validitySeconds); !r) return r.error();

  auto caCert = parseCertificate(ca.certPem, "CA certificate");
  if (!caCert) return caCert.error();
  auto caKey = parsePrivateKey(ca.keyPem, "CA key");
  if (!caKey) return caKey.error();
  X509& issuer = **caCert;
  if (X509_check_ca(&issuer) != 1) {
    ERR_clear_error();
    return Error{"CA certificate \"" + openssl::subjectText(issuer) +
                 "\" is not a CA (it needs basicConstraints CA:TRUE and, with a keyUsage, "
                 "keyCertSign)"};
  }
  auto caPublicKey = publicKey(issuer, "CA certificate");
  if (!caPublicKey) return caPublicKey.error();
  if (EVP_PKEY_eq(*caPublicKey, caKey->get()) != 1) {
    ERR_clear_error();
    return Error{"CA key does not match the CA certificate \"" + openssl::subjectText(issuer) +
                 "\""};
  }
  std::time_t now = std::time(nullptr);
  auto caNotAfter = openssl::notAfterUnix(issuer);
  if (!caNotAfter) return Error{"CA certificate: its notAfter does not parse"};
  if (*caNotAfter <= now) {
    return Error{"CA certificate \"" + openssl::subjectText(issuer) + "\" expired at " +
                 openssl::notAfterText(issuer)};
  }
  std::time_t notAfter = std::min(now + static_cast<std::time_t>(validitySeconds),
                                  static_cast<std::time_t>(*caNotAfter));

  std::string cn = kDefaultCommonName;
  auto firstDns = std::find_if(sans.begin(), sans.end(),
                               [](const std::string& s) { return !openssl::isIpAddress(s); });
  if (firstDns != sans.end() && utf8Characters(*firstDns) <= kMaxCommonNameCharacters) {
    cn = *firstDns;
  }

  auto key = openssl::makeP256Key();
  if (!key) return failed(what, key.error());
  auto cert = openssl::newCertificate(**key, cn, &issuer, now - kBackdateSeconds, notAfter);
  if (!cert) return failed(what, cert.error());
  auto added = addExtensions(**cert, &issuer,
                             {
                                 {NID_basic_constraints, "CA:FALSE"},
                                 {NID_key_usage, "critical,digitalSignature"},
                                 {NID_ext_key_usage, "serverAuth"},
                                 {NID_subject_key_identifier, "hash"},
                                 // A CA of our own has a key id; one brought from
                                 // elsewhere may not, and then its name and serial do.
                                 {NID_authority_key_identifier, "keyid,issuer"},
                                 {NID_subject_alt_name, *sanValue},
                             },
                             what);
  if (!added) return added.error();
  return finish(**cert, **caKey, **key, what);
}

Result<CertificateDetails> inspectCertificate(const std::string& certPem) {
  ERR_clear_error();
  auto parsed = parseCertificate(certPem, "certificate");
  if (!parsed) return parsed.error();
  X509& cert = **parsed;
  std::uint32_t flags = X509_get_extension_flags(&cert);
  if ((flags & EXFLAG_INVALID) != 0) {
    ERR_clear_error();
    return Error{"certificate: its extensions are invalid (one does not parse or appears twice)"};
  }
  CertificateDetails details;
  details.isCA = (flags & EXFLAG_CA) != 0;
  auto notBefore = openssl::notBeforeUnix(cert);
  auto notAfter = openssl::notAfterUnix(cert);
  if (!notBefore || !notAfter) {
    ERR_clear_error();
    return Error{"certificate: its validity does not parse"};
  }
  details.notBefore = *notBefore;
  details.notAfter = *notAfter;
  auto subject = commonName(*X509_get_subject_name(&cert), "certificate subject");
  if (!subject) return subject.error();
  details.subjectCommonName = std::move(*subject);
  auto issuer = commonName(*X509_get_issuer_name(&cert), "certificate issuer");
  if (!issuer) return issuer.error();
  details.issuerCommonName = std::move(*issuer);
  if (auto r = readSubjectAltNames(cert, details); !r) return r.error();
  return details;
}

Result<bool> signedBy(const std::string& certPem, const std::string& caPem) {
  ERR_clear_error();
  auto cert = parseCertificate(certPem, "certificate");
  if (!cert) return cert.error();
  auto ca = parseCertificate(caPem, "CA certificate");
  if (!ca) return ca.error();
  auto caKey = publicKey(**ca, "CA certificate");
  if (!caKey) return caKey.error();
  // 0: another key signed it; -1: the signature cannot even be checked with this
  // key (another algorithm). Neither is a signature by this CA.
  bool verified = X509_verify(cert->get(), *caKey) == 1;
  ERR_clear_error();
  return verified;
}

Result<bool> keyMatches(const std::string& certPem, const std::string& keyPem) {
  ERR_clear_error();
  auto cert = parseCertificate(certPem, "certificate");
  if (!cert) return cert.error();
  auto key = parsePrivateKey(keyPem, "private key");
  if (!key) return key.error();
  auto certKey = publicKey(**cert, "certificate");
  if (!certKey) return certKey.error();
  bool same = EVP_PKEY_eq(*certKey, key->get()) == 1;  // -1, -2: other key types
  ERR_clear_error();
  return same;
}

}  // namespace podshaper::pki
