#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "base/result.h"

namespace podshaper::server {

// A component's serving certificate for its own /metrics and probes where none is given:
// self-signed for localhost, in a private directory under /tmp removed with this object.
// (Prometheus and the kubelet's probes do not verify it; the webhook's own certificate is
// another matter: the operator or cert-manager makes that one.)
class OwnCertificate {
 public:
  static Result<std::unique_ptr<OwnCertificate>> make(const std::string& commonName);
  ~OwnCertificate();
  OwnCertificate(const OwnCertificate&) = delete;
  OwnCertificate& operator=(const OwnCertificate&) = delete;

  std::string certFile() const { return (dir_ / "tls.crt").string(); }
  std::string keyFile() const { return (dir_ / "tls.key").string(); }

 private:
  explicit OwnCertificate(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::filesystem::path dir_;
};

}  // namespace podshaper::server
