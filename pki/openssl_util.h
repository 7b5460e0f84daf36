#pragma once

// RAII handles, small readers and the certificate-building steps shared by
// selfsigned.cc and certs.cc. Internal to server/ (and its tests): other
// targets go through https_server.h, selfsigned.h and certs.h.

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace podshaper::pki::openssl {

template <auto Free>
struct Deleter {
  template <class T>
  void operator()(T* p) const {
    Free(p);
  }
};

using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using BignumPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using EvpPkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, Deleter<EVP_PKEY_CTX_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using X509ExtensionPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;

// Drains this thread's OpenSSL error queue into one line ("a; b"), or
// "unknown OpenSSL error" when it is empty.
std::string takeErrors();

// A read-only memory BIO over `data` (which must outlive it); null when it
// cannot be made (`data` over 2 GiB included).
BioPtr memoryBio(std::string_view data);

// PEM parsing that never prompts for a passphrase on the terminal (OpenSSL's
// default when no callback is given): an encrypted key simply fails.
X509Ptr readPemCertificate(std::string_view pem);
EvpPkeyPtr readPemPrivateKey(std::string_view pem);

std::string sha256Hex(std::string_view data);
std::string certificateSha256(const X509& cert);  // of the DER encoding, hex
std::string serialHex(const X509& cert);
std::string subjectText(const X509& cert);          // "CN=podshaper-webhook"
std::optional<std::int64_t> notBeforeUnix(const X509& cert);
std::optional<std::int64_t> notAfterUnix(const X509& cert);
std::string notAfterText(const X509& cert);         // "2026-01-02T03:04:05Z"

// Building certificates. The errors say what failed (with OpenSSL's reasons)
// but not which certificate: the caller puts that in front.

bool isIpAddress(const std::string& s);  // IPv4 or IPv6, as inet_pton reads them

// The subjectAltName value for X509V3_EXT_conf_nid ("DNS:a.svc,IP:10.0.0.1"):
// an entry that parses as an IP address becomes an IP SAN, any other a DNS SAN.
// An empty entry, or one with a character outside [A-Za-z0-9.*_-] (which could
// also smuggle a second entry in through ','), is an error naming it.
Result<std::string> subjectAltNameValue(const std::vector<std::string>& names);

Result<EvpPkeyPtr> makeP256Key();

// An X.509 v3 certificate for `key`, unsigned and without extensions: a random
// serial of 128 bits, subject CN=commonName, issuer `issuer`'s subject (null:
// its own subject) and validity [notBefore, notAfter].
Result<X509Ptr> newCertificate(EVP_PKEY& key, const std::string& commonName, X509* issuer,
                               std::time_t notBefore, std::time_t notAfter);

// Adds an extension in openssl.cnf syntax ("critical,CA:TRUE"); `issuer` (null:
// the certificate itself) is where authorityKeyIdentifier takes its key id from.
Result<void> addExtension(X509& cert, X509* issuer, int nid, const std::string& value);

Result<std::string> certificatePem(const X509& cert);
Result<std::string> privateKeyPem(const EVP_PKEY& key);  // PKCS#8, unencrypted

}  // namespace podshaper::pki::openssl
