#pragma once

// The webhook's certificate authority and serving certificate, as
// podshaper-operator manages them: made in memory as PEM (the operator keeps
// them in a Secret and the CA in the MutatingWebhookConfiguration's caBundle),
// and read back to decide when to rotate. No files, no clock other than now.
//
//   auto ca = makeCertificateAuthority("podshaper-webhook-ca", 5 * 365 * 86400LL);
//   auto leaf = issueServingCertificate(*ca, {"podshaper-webhook.podshaper.svc"}, 365 * 86400LL);

#include <string>
#include <vector>

#include "base/result.h"

namespace podshaper::pki {

struct KeyPair {
  std::string certPem;
  std::string keyPem;  // PKCS#8 PEM, unencrypted
};

// A self-signed CA: EC P-256, subject and issuer CN=commonName (1 to 64
// characters), basicConstraints critical CA:TRUE pathlen:0, keyUsage critical
// keyCertSign+cRLSign, subjectKeyIdentifier, a random 128-bit serial, valid from
// five minutes ago (clock skew) until `validitySeconds` from now (1 s to 100
// years).
Result<KeyPair> makeCertificateAuthority(const std::string& commonName, long long validitySeconds);

// A serving certificate signed by `ca` (which must be a CA whose key matches it
// and which has not expired): EC P-256, subjectAltName from `sans` (at least
// one; each entry that parses as an IPv4/IPv6 address is an IP SAN, any other a
// DNS SAN), CN = the first DNS SAN when it fits the 64 characters a CN may have,
// else "podshaper-webhook" (clients check the SANs, not the CN),
// basicConstraints CA:FALSE, keyUsage critical digitalSignature,
// extendedKeyUsage serverAuth, subject and authority key identifiers, a random
// 128-bit serial, valid from five minutes ago until `validitySeconds` from now
// (1 s to 100 years) but never beyond the CA's notAfter.
Result<KeyPair> issueServingCertificate(const KeyPair& ca, const std::vector<std::string>& sans,
                                        long long validitySeconds);

// What the operator checks before deciding to rotate. (Not CertificateInfo:
// tls_context.h has one in this namespace, what the server logs about the
// certificate it serves.)
struct CertificateDetails {
  long long notBefore = 0;  // seconds since the epoch
  long long notAfter = 0;
  std::vector<std::string> dnsNames;     // SANs, in the certificate's order
  std::vector<std::string> ipAddresses;  // as text: "10.0.0.1", "::1"
  std::string subjectCommonName;         // empty when there is none
  std::string issuerCommonName;
  bool isCA = false;  // basicConstraints CA:TRUE
};

// Reads the first certificate in `certPem`. A certificate OpenSSL itself would
// refuse (extensions that do not parse, a duplicate extension) is an error.
Result<CertificateDetails> inspectCertificate(const std::string& certPem);

// Whether the first certificate in certPem carries a signature that the public
// key of the first certificate in caPem verifies. Names and validity are not
// compared. Input that does not parse is an error, not false.
Result<bool> signedBy(const std::string& certPem, const std::string& caPem);

// Whether keyPem (an unencrypted PEM private key) is the key of the first
// certificate in certPem.
Result<bool> keyMatches(const std::string& certPem, const std::string& keyPem);

}  // namespace podshaper::pki
