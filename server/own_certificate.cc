#include "server/own_certificate.h"

#include <cstdlib>

#include "pki/selfsigned.h"

namespace podshaper::server {

Result<std::unique_ptr<OwnCertificate>> OwnCertificate::make(const std::string& commonName) {
  std::string pattern = "/tmp/" + commonName + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return makeError("cannot make a directory for the serving certificate");
  std::unique_ptr<OwnCertificate> cert(new OwnCertificate(pattern));
  if (auto ok = pki::writeSelfSignedCert(cert->certFile(), cert->keyFile(), commonName, {"localhost", "127.0.0.1"}, 365);
      !ok) {
    return makeError("serving certificate: " + ok.error().message);
  }
  return cert;
}

OwnCertificate::~OwnCertificate() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace podshaper::server
