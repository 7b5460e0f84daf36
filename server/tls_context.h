#pragma once

// The server's TLS context and its hot reload. Internal to server/: it pulls in
// Boost.Asio's SSL headers, which https_server.h keeps away from its users.

#include <boost/asio/ssl/context.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/result.h"

namespace podshaper::server {

using TlsContextPtr = std::shared_ptr<boost::asio::ssl::context>;

// What the serving certificate says about itself, for logs and metrics.
struct CertificateInfo {
  std::string subject;
  std::string serial;
  std::string notAfter;
  std::int64_t notAfterUnix = 0;
  std::string sha256;  // of the DER encoding: what a client sees
};

struct ServerTls {
  TlsContextPtr context;
  CertificateInfo info;
};

// A server context: TLS 1.2 minimum; for TLS 1.2 only ECDHE with AES-GCM or
// ChaCha20-Poly1305 (Mozilla "intermediate" without DHE); no renegotiation, no
// compression, no session resumption (tickets or cache); OpenSSL security
// level 2 (a certificate with an RSA key under 2048 bits is refused).
// `certPem` is the leaf then any intermediates; `keyPem` an unencrypted PEM
// private key that must match the leaf. The file names only make the error
// messages precise.
Result<ServerTls> makeServerTls(const std::string& certPem, const std::string& keyPem,
                                const std::string& certFile, const std::string& keyFile);

// Owns the current server context and builds a new one when the certificate or
// key files change on disk. Connections take current() when accepted and keep
// that context for their lifetime, so a swap never disturbs them.
class CertificateReloader {
 public:
  enum class PollResult { unchanged, reloaded, failed };

  CertificateReloader(std::string certFile, std::string keyFile);

  // The first load; the error says which file and what is wrong with it.
  Result<void> load();

  // One check. Cheap when nothing changed (two stat calls). When a file's
  // inode, size, mtime or ctime changed it reads both and compares their
  // SHA-256 with the serving pair's; new content becomes a new context, or,
  // when it does not load (half written, key not matching yet), `failed` and
  // a warning (once per distinct problem), keeping the serving context. After a
  // failure every poll re-reads the files until they load.
  // Calls to poll() must not overlap; current() may run concurrently with it.
  PollResult poll();

  TlsContextPtr current() const;
  CertificateInfo info() const;
  std::uint64_t reloads() const { return reloads_.load(std::memory_order_relaxed); }

  const std::string& certFile() const { return certFile_; }
  const std::string& keyFile() const { return keyFile_; }

 private:
  struct FileStamp {
    bool exists = false;
    std::uint64_t device = 0, inode = 0, size = 0;
    std::int64_t mtimeNs = 0, ctimeNs = 0;
    bool operator==(const FileStamp&) const = default;
  };
  struct Stamps {
    FileStamp cert, key;
    bool operator==(const Stamps&) const = default;
  };
  Stamps stat() const;
  PollResult fail(const std::string& problem, const std::string& contentHash);

  const std::string certFile_;
  const std::string keyFile_;

  // poll()'s own state (never touched concurrently).
  Stamps lastStamps_;
  std::string servingHash_;
  std::string failedHash_;
  std::string lastProblem_;
  bool retryPending_ = false;

  mutable std::mutex mutex_;  // guards tls_
  ServerTls tls_;
  std::atomic<std::uint64_t> reloads_{0};
};

}  // namespace podshaper::server
