#pragma once

// A small TLS client and file helpers for the server tests. Every network
// operation has a deadline, so a server bug fails a test instead of hanging it.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "base/result.h"

namespace podshaper::server::testkit {

struct ClientOptions {
  int minVersion = 0;        // TLS1_2_VERSION etc.; 0: OpenSSL's default
  int maxVersion = 0;
  std::string ciphers{};      // TLS 1.2 cipher list; empty: OpenSSL's default
  std::string caFile{};       // verify the server against it (and verifyHost) when set
  std::string verifyHost{};   // "127.0.0.1" or a DNS name
  std::chrono::milliseconds timeout{3000};
};

struct HttpReply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  bool keepAlive = false;
};

class TlsTestClient {
 public:
  explicit TlsTestClient(ClientOptions options = {});
  ~TlsTestClient();

  // TCP connect to 127.0.0.1:port and the TLS handshake.
  Result<void> connect(std::uint16_t port);

  Result<HttpReply> request(const std::string& method, const std::string& target,
                            const std::string& body = "",
                            const std::map<std::string, std::string>& headers = {},
                            unsigned version = 11);

  // Raw bytes over the TLS stream, then the reply to them.
  Result<void> writeRaw(const std::string& bytes);
  Result<HttpReply> readReply();

  // Whether the server has closed the connection (waits up to `wait`).
  bool closedByServer(std::chrono::milliseconds wait);

  std::string peerCertificateSha256() const;
  std::string protocol() const;  // "TLSv1.2"
  std::string cipher() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Plain TCP: sends `bytes` and reports whether the server closed the
// connection within `wait` (what it sent back is in `received`).
struct RawExchange {
  bool closed = false;
  std::string received;
};
RawExchange rawTcpExchange(std::uint16_t port, const std::string& bytes,
                           std::chrono::milliseconds wait);

// SHA-256 of the DER of the first certificate in a PEM file, hex; as
// peerCertificateSha256() reports it.
std::string pemFileSha256(const std::string& path);

std::string readFile(const std::string& path);
// Writes through a temporary file and a rename, as a Secret volume or
// cert-manager would.
void replaceFile(const std::string& path, const std::string& content);
// Writes in place, truncating first: a writer caught half-way.
void overwriteFile(const std::string& path, const std::string& content);

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace podshaper::server::testkit
