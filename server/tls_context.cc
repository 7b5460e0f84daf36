#include "server/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "cli/logging.h"
#include "pki/openssl_util.h"

namespace podshaper::server {

namespace {
const cli::Logger& kLog = cli::logger("https");

namespace ssl = boost::asio::ssl;

// Mozilla's "intermediate" profile without its DHE suites: for TLS 1.2 ECDHE for
// forward secrecy (no RSA key exchange) and AEAD only (no CBC, so no SHA-1
// MACs); the client picks among them (all are good). TLS 1.3 suites are set
// too, so that a system openssl.cnf cannot change them.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
constexpr const char* kTls13Suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr const char* kGroups = "X25519:P-256:P-384";
// 112-bit security: RSA keys of 2048 bits or more, no SHA-1 signatures. OpenSSL's
// built-in default is 1 (1024-bit RSA); Debian's openssl.cnf raises it to 2, but
// a distroless image may have no openssl.cnf at all.
constexpr int kSecurityLevel = 2;

// A serving certificate and key are a few KiB; anything this large is a wrong path.
constexpr long kMaxPemBytes = 1024 * 1024;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

Result<std::string> readFile(const std::string& path, const char* what) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    return Error{std::string("cannot read ") + what + " file \"" + path +
                 "\": " + std::strerror(errno)};
  }
  std::string content;
  char buf[8192];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
    content.append(buf, n);
    if (content.size() > static_cast<std::size_t>(kMaxPemBytes)) {
      return Error{std::string(what) + " file \"" + path + "\" is larger than 1 MiB"};
    }
  }
  if (std::ferror(f.get())) {
    return Error{std::string("cannot read ") + what + " file \"" + path +
                 "\": " + std::strerror(errno)};
  }
  return content;
}

std::vector<cli::LogField> describe(const std::string& file, const CertificateInfo& info) {
  return {{"file", file},
          {"subject", info.subject},
          {"serial", info.serial},
          {"expires", info.notAfter},
          {"sha256", info.sha256.substr(0, 16)}};
}

void warnIfExpired(const CertificateInfo& info, const std::string& certFile) {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  if (info.notAfterUnix != 0 && info.notAfterUnix < now) {
    kLog.warn({{"file", certFile}}, "TLS certificate expired at {}; clients will refuse it", info.notAfter);
  }
}

}  // namespace

Result<ServerTls> makeServerTls(const std::string& certPem, const std::string& keyPem,
                                const std::string& certFile, const std::string& keyFile) {
  ERR_clear_error();
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = context->native_handle();
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                       ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  // No session resumption. A ticket key lives as long as the context (until
  // the next certificate rotation), and whoever obtains it can decrypt every
  // TLS 1.2 session resumed with it; a server-side cache holds up to 20,480
  // sessions a flood of handshakes can fill. Webhook clients keep their
  // connections alive, so resumption saves them little.
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_security_level(native, kSecurityLevel);
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1 ||
      SSL_CTX_set_ciphersuites(native, kTls13Suites) != 1 ||
      SSL_CTX_set1_groups_list(native, kGroups) != 1 ||
      SSL_CTX_set_num_tickets(native, 0) != 1) {
    return Error{"cannot configure TLS: " + pki::openssl::takeErrors()};
  }

  // The key is parsed here rather than by asio, whose loader would fall back to
  // prompting on the terminal for an encrypted key.
  pki::openssl::EvpPkeyPtr key = pki::openssl::readPemPrivateKey(keyPem);
  if (!key) {
    return Error{"private key file \"" + keyFile +
                 "\" holds no readable unencrypted PEM private key (" + pki::openssl::takeErrors() +
                 ")"};
  }
  boost::system::error_code ec;
  context->use_certificate_chain(boost::asio::buffer(certPem), ec);
  X509* leaf = SSL_CTX_get0_certificate(native);
  if (ec || leaf == nullptr) {
    int reason = ec ? ERR_GET_REASON(static_cast<unsigned long>(ec.value())) : 0;
    if (reason == SSL_R_EE_KEY_TOO_SMALL || reason == SSL_R_CA_KEY_TOO_SMALL ||
        reason == SSL_R_CA_MD_TOO_WEAK) {
      return Error{"certificate file \"" + certFile + "\" is too weak to serve (" + ec.message() +
                   "): it needs an RSA key of 2048 bits or more (or an ECDSA key) and no SHA-1 "
                   "signatures in its chain"};
    }
    return Error{"certificate file \"" + certFile + "\" holds no valid PEM certificate chain (" +
                 (ec ? ec.message() : pki::openssl::takeErrors()) + ")"};
  }
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return Error{"private key \"" + keyFile + "\" does not match certificate \"" + certFile +
                 "\""};
  }
  if (SSL_CTX_use_PrivateKey(native, key.get()) != 1) {
    return Error{"cannot use private key \"" + keyFile + "\": " + pki::openssl::takeErrors()};
  }

  CertificateInfo info;
  info.subject = pki::openssl::subjectText(*leaf);
  info.serial = pki::openssl::serialHex(*leaf);
  info.notAfter = pki::openssl::notAfterText(*leaf);
  info.notAfterUnix = pki::openssl::notAfterUnix(*leaf).value_or(0);
  info.sha256 = pki::openssl::certificateSha256(*leaf);
  return ServerTls{std::move(context), std::move(info)};
}

CertificateReloader::CertificateReloader(std::string certFile, std::string keyFile)
    : certFile_(std::move(certFile)), keyFile_(std::move(keyFile)) {}

CertificateReloader::Stamps CertificateReloader::stat() const {
  auto stampOf = [](const std::string& path) {
    FileStamp s;
    struct stat st {};
    // stat, not lstat: a Kubernetes Secret volume swaps a symlink (..data).
    if (::stat(path.c_str(), &st) != 0) return s;
    s.exists = true;
    s.device = st.st_dev;
    s.inode = st.st_ino;
    s.size = static_cast<std::uint64_t>(st.st_size);
    s.mtimeNs = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    s.ctimeNs = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
    return s;
  };
  return Stamps{stampOf(certFile_), stampOf(keyFile_)};
}

Result<void> CertificateReloader::load() {
  Stamps stamps = stat();  // before reading: a change after it shows up at the next poll
  auto cert = readFile(certFile_, "certificate");
  if (!cert) return cert.error();
  auto key = readFile(keyFile_, "private key");
  if (!key) return key.error();
  auto tls = makeServerTls(*cert, *key, certFile_, keyFile_);
  if (!tls) return tls.error();

  kLog.info(describe(certFile_, tls->info), "TLS certificate loaded");
  warnIfExpired(tls->info, certFile_);
  lastStamps_ = stamps;
  servingHash_ = pki::openssl::sha256Hex(*cert + '\0' + *key);
  std::lock_guard lock(mutex_);
  tls_ = std::move(*tls);
  return {};
}

CertificateReloader::PollResult CertificateReloader::poll() {
  Stamps stamps = stat();
  if (!retryPending_ && stamps == lastStamps_) return PollResult::unchanged;
  lastStamps_ = stamps;

  auto cert = readFile(certFile_, "certificate");
  if (!cert) return fail(cert.error().message, {});
  auto key = readFile(keyFile_, "private key");
  if (!key) return fail(key.error().message, {});
  std::string hash = pki::openssl::sha256Hex(*cert + '\0' + *key);
  if (hash == servingHash_) {
    // Touched, or rewritten with the same bytes, or back to what is serving.
    retryPending_ = false;
    lastProblem_.clear();
    return PollResult::unchanged;
  }
  if (hash == failedHash_) return PollResult::failed;  // the same bytes will fail the same way

  auto tls = makeServerTls(*cert, *key, certFile_, keyFile_);
  if (!tls) return fail(tls.error().message, hash);

  std::string previousSerial;
  {
    std::lock_guard lock(mutex_);
    previousSerial = tls_.info.serial;
    tls_ = std::move(*tls);
  }
  servingHash_ = hash;
  failedHash_.clear();
  lastProblem_.clear();
  retryPending_ = false;
  reloads_.fetch_add(1, std::memory_order_relaxed);
  CertificateInfo now = info();
  kLog.info(describe(certFile_, now), "TLS certificate reloaded (was serial {})", previousSerial);
  warnIfExpired(now, certFile_);
  return PollResult::reloaded;
}

CertificateReloader::PollResult CertificateReloader::fail(const std::string& problem,
                                                          const std::string& contentHash) {
  retryPending_ = true;
  failedHash_ = contentHash;
  if (problem != lastProblem_) {
    kLog.warn({{"file", certFile_}}, "new TLS certificate not loaded, still serving serial {}: {}", info().serial,
            problem);
    lastProblem_ = problem;
  }
  return PollResult::failed;
}

TlsContextPtr CertificateReloader::current() const {
  std::lock_guard lock(mutex_);
  return tls_.context;
}

CertificateInfo CertificateReloader::info() const {
  std::lock_guard lock(mutex_);
  return tls_.info;
}

}  // namespace podshaper::server
