#include "server/selfsigned.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/ec.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "server/openssl_util.h"

namespace podshaper::server {

namespace {

using namespace openssl;  // NOLINT: local to this file

constexpr long kBackdateSeconds = 5 * 60;

Error opensslError(const std::string& what) {
  return Error{"selfsigned: " + what + ": " + takeErrors()};
}

bool isIpAddress(const std::string& s) {
  std::array<unsigned char, sizeof(struct in6_addr)> buf{};
  return inet_pton(AF_INET, s.c_str(), buf.data()) == 1 ||
         inet_pton(AF_INET6, s.c_str(), buf.data()) == 1;
}

Result<EvpPkeyPtr> makeP256Key() {
  EvpPkeyCtxPtr ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
      EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx.get(), NID_X9_62_prime256v1) != 1 ||
      EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return opensslError("cannot generate an EC P-256 key");
  }
  return EvpPkeyPtr(raw);
}

Result<bool> setRandomSerial(X509& cert) {
  std::array<unsigned char, 16> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return opensslError("cannot draw a random serial");
  }
  bytes[0] &= 0x7f;  // DER INTEGER: keep it positive
  bytes[0] |= 0x40;  // and a full 16 bytes long
  BignumPtr bn(BN_bin2bn(bytes.data(), static_cast<int>(bytes.size()), nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(&cert)) == nullptr) {
    return opensslError("cannot set the serial");
  }
  return true;
}

Result<bool> addExtension(X509& cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, &cert, &cert, nullptr, nullptr, 0);
  X509ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(&cert, ext.get(), -1) != 1) {
    return opensslError(std::string("cannot add extension ") + OBJ_nid2sn(nid) + " = " + value);
  }
  return true;
}

// Writes to "<path>.tmp.<pid>" and renames it over `path`.
Result<bool> writeFileAtomically(const std::string& path, const std::string& content,
                                 mode_t mode) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    return Error{"selfsigned: cannot create \"" + tmp + "\": " + std::strerror(errno)};
  }
  // The umask may have narrowed the mode at creation; the key must stay 0600.
  bool ok = ::fchmod(fd, mode) == 0;
  std::size_t written = 0;
  while (ok && written < content.size()) {
    ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) written += static_cast<std::size_t>(n);
  }
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return Error{"selfsigned: cannot write \"" + path + "\": " + std::strerror(err)};
  }
  return true;
}

template <class Write>
Result<std::string> pem(Write write, const std::string& what) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return opensslError("cannot encode the " + what);
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

}  // namespace

Result<bool> writeSelfSignedCert(const std::string& certFile, const std::string& keyFile,
                                 const std::string& commonName,
                                 const std::vector<std::string>& dnsAndIpSans, int days) {
  if (commonName.empty()) return Error{"selfsigned: the common name is empty"};
  if (days <= 0) {
    return Error{"selfsigned: validity must be at least one day, got " + std::to_string(days)};
  }
  std::string sans;
  for (const std::string& name : dnsAndIpSans.empty() ? std::vector{commonName} : dnsAndIpSans) {
    if (name.empty() || name.find_first_of(", \t\n") != std::string::npos) {
      return Error{"selfsigned: \"" + name + "\" is not a DNS name or IP address"};
    }
    if (!sans.empty()) sans += ',';
    sans += (isIpAddress(name) ? "IP:" : "DNS:") + name;
  }

  auto key = makeP256Key();
  if (!key) return key.error();

  X509Ptr cert(X509_new());
  if (!cert) return opensslError("cannot allocate a certificate");
  X509& x = *cert;
  if (X509_set_version(&x, 2) != 1) return opensslError("cannot set version 3");
  if (auto r = setRandomSerial(x); !r) return r.error();
  if (X509_gmtime_adj(X509_getm_notBefore(&x), -kBackdateSeconds) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(&x), static_cast<long>(days) * 24 * 60 * 60) ==
          nullptr) {
    return opensslError("cannot set the validity");
  }
  X509_NAME* name = X509_get_subject_name(&x);
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(commonName.c_str()), -1,
                                 -1, 0) != 1 ||
      X509_set_issuer_name(&x, name) != 1) {
    return opensslError("cannot set the name CN=" + commonName);
  }
  if (X509_set_pubkey(&x, key->get()) != 1) return opensslError("cannot set the public key");

  const std::pair<int, std::string> extensions[] = {
      {NID_basic_constraints, "critical,CA:TRUE"},
      {NID_key_usage, "critical,digitalSignature,keyCertSign"},
      {NID_ext_key_usage, "serverAuth"},
      {NID_subject_key_identifier, "hash"},
      {NID_authority_key_identifier, "keyid:always"},
      {NID_subject_alt_name, sans},
  };
  for (const auto& [nid, value] : extensions) {
    if (auto r = addExtension(x, nid, value); !r) return r.error();
  }
  if (X509_sign(&x, key->get(), EVP_sha256()) <= 0) {
    return opensslError("cannot sign the certificate");
  }

  auto keyPem = pem(
      [&](BIO* bio) {
        return PEM_write_bio_PrivateKey(bio, key->get(), nullptr, nullptr, 0, nullptr, nullptr);
      },
      "private key");
  if (!keyPem) return keyPem.error();
  auto certPem = pem([&](BIO* bio) { return PEM_write_bio_X509(bio, &x); }, "certificate");
  if (!certPem) return certPem.error();

  if (auto r = writeFileAtomically(keyFile, *keyPem, 0600); !r) return r.error();
  if (auto r = writeFileAtomically(certFile, *certPem, 0644); !r) return r.error();
  return true;
}

}  // namespace podshaper::server
