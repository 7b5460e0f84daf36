#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace podshaper::pki {

// Writes a self-signed X.509 v3 certificate and its EC P-256 private key as PEM:
// subject and issuer CN=commonName, serial 128 random bits, valid from five
// minutes ago (clock skew) for `days` days, SHA-256 signature, extensions
// basicConstraints CA:TRUE (so the certificate can be its own caBundle),
// keyUsage digitalSignature+keyCertSign, extendedKeyUsage serverAuth and
// subjectAltName: each entry of dnsAndIpSans that parses as an IPv4/IPv6
// address becomes an IP SAN, every other one a DNS SAN; with none given,
// commonName is the DNS SAN (Go clients ignore the CN).
//
// Each file is written to a temporary file beside it and renamed into place, so
// a watcher never reads half a file; the key is created with mode 0600. The key
// is written before the certificate: a reader in between sees a key that does
// not match the old certificate, which the server's reloader rejects and retries.
Result<void> writeSelfSignedCert(const std::string& certFile, const std::string& keyFile,
                                 const std::string& commonName,
                                 const std::vector<std::string>& dnsAndIpSans, int days);

}  // namespace podshaper::pki
