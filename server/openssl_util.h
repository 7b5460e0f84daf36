#pragma once

// RAII handles and small readers for OpenSSL objects. Internal to server/ (and
// its tests): other targets go through https_server.h and selfsigned.h.

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace podshaper::server::openssl {

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
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using X509ExtensionPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;

// Drains this thread's OpenSSL error queue into one line ("a; b"), or
// "unknown OpenSSL error" when it is empty.
std::string takeErrors();

// A read-only memory BIO over `data` (which must outlive it).
BioPtr memoryBio(std::string_view data);

// PEM parsing that never prompts for a passphrase on the terminal (OpenSSL's
// default when no callback is given): an encrypted key simply fails.
X509Ptr readPemCertificate(std::string_view pem);
EvpPkeyPtr readPemPrivateKey(std::string_view pem);

std::string sha256Hex(std::string_view data);
std::string certificateSha256(const X509& cert);  // of the DER encoding, hex
std::string serialHex(const X509& cert);
std::string subjectText(const X509& cert);          // "CN=podshaper-webhook"
std::optional<std::int64_t> notAfterUnix(const X509& cert);
std::string notAfterText(const X509& cert);         // "2026-01-02T03:04:05Z"

}  // namespace podshaper::server::openssl
