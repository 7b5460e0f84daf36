#include "kube/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/context.hpp>

namespace podshaper::kube {
namespace {

std::string describe(const boost::system::error_code& ec) {
  std::string what = ec.message();
  // asio's message for OpenSSL errors is terse; the queue may say more.
  if (unsigned long e = ERR_peek_last_error(); e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    what += " (" + std::string(buf) + ")";
  }
  ERR_clear_error();
  return what;
}

}  // namespace

Result<void> applyTlsConfig(boost::asio::ssl::context& context, const ClientConfig& config) {
  boost::system::error_code ec;
  if (!config.caPem.empty()) {
    if (config.caPem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return makeError("TLS: certificate authority data holds no PEM certificate");
    }
    context.add_certificate_authority(boost::asio::buffer(config.caPem), ec);
    if (ec) return makeError("TLS: certificate authority: " + describe(ec));
  }
  if (!config.clientCertPem.empty() || !config.clientKeyPem.empty()) {
    if (config.clientCertPem.empty() || config.clientKeyPem.empty()) {
      return makeError("TLS: a client certificate needs both the certificate and its key");
    }
    context.use_certificate_chain(boost::asio::buffer(config.clientCertPem), ec);
    if (ec) return makeError("TLS: client certificate: " + describe(ec));
    context.use_private_key(boost::asio::buffer(config.clientKeyPem), boost::asio::ssl::context::pem, ec);
    if (ec && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return makeError("TLS: client key does not match the client certificate");
    }
    if (ec) return makeError("TLS: client key: " + describe(ec));
    if (SSL_CTX_check_private_key(context.native_handle()) != 1) {
      ERR_clear_error();
      return makeError("TLS: client key does not match the client certificate");
    }
  }
  return {};
}

Result<void> checkTlsConfig(const ClientConfig& config) {
  boost::asio::ssl::context context(boost::asio::ssl::context::tls_client);
  return applyTlsConfig(context, config);
}

}  // namespace podshaper::kube
