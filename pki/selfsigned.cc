#include "pki/selfsigned.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>

#include "pki/openssl_util.h"

namespace podshaper::pki {

namespace {

constexpr std::time_t kBackdateSeconds = 5 * 60;

Error failed(const Error& e) { return Error{"selfsigned: " + e.message}; }

// Writes to "<path>.tmp.<pid>" and renames it over `path`.
Result<void> writeFileAtomically(const std::string& path, const std::string& content,
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
  return {};
}

}  // namespace

Result<void> writeSelfSignedCert(const std::string& certFile, const std::string& keyFile,
                                 const std::string& commonName,
                                 const std::vector<std::string>& dnsAndIpSans, int days) {
  if (commonName.empty()) return Error{"selfsigned: the common name is empty"};
  if (days <= 0) {
    return Error{"selfsigned: validity must be at least one day, got " + std::to_string(days)};
  }
  auto sans = openssl::subjectAltNameValue(dnsAndIpSans.empty() ? std::vector{commonName}
                                                                 : dnsAndIpSans);
  if (!sans) return failed(sans.error());

  auto key = openssl::makeP256Key();
  if (!key) return failed(key.error());
  std::time_t now = std::time(nullptr);
  auto cert = openssl::newCertificate(**key, commonName, nullptr, now - kBackdateSeconds,
                                      now + static_cast<std::time_t>(days) * 24 * 60 * 60);
  if (!cert) return failed(cert.error());

  const std::pair<int, std::string> extensions[] = {
      {NID_basic_constraints, "critical,CA:TRUE"},
      {NID_key_usage, "critical,digitalSignature,keyCertSign"},
      {NID_ext_key_usage, "serverAuth"},
      {NID_subject_key_identifier, "hash"},
      {NID_authority_key_identifier, "keyid:always"},
      {NID_subject_alt_name, *sans},
  };
  for (const auto& [nid, value] : extensions) {
    if (auto r = openssl::addExtension(**cert, nullptr, nid, value); !r) return failed(r.error());
  }
  if (X509_sign(cert->get(), key->get(), EVP_sha256()) <= 0) {
    return Error{"selfsigned: cannot sign the certificate: " + openssl::takeErrors()};
  }

  auto keyPem = openssl::privateKeyPem(**key);
  if (!keyPem) return failed(keyPem.error());
  auto certPem = openssl::certificatePem(**cert);
  if (!certPem) return failed(certPem.error());

  if (auto r = writeFileAtomically(keyFile, *keyPem, 0600); !r) return r.error();
  if (auto r = writeFileAtomically(certFile, *certPem, 0644); !r) return r.error();
  return {};
}

}  // namespace podshaper::pki
