#include "tests/unit/server/tls_test_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "pki/openssl_util.h"

namespace podshaper::server::testkit {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

namespace {

// Starts one asynchronous operation and runs the io_context until it is done;
// the stream's deadline bounds it.
template <class Start>
beast::error_code runOne(net::io_context& ioc, Start start) {
  beast::error_code result = net::error::would_block;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

HttpReply toReply(http::response<http::string_body>& res) {
  HttpReply reply;
  reply.status = static_cast<int>(res.result_int());
  reply.body = res.body();
  reply.keepAlive = res.keep_alive();
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    reply.headers[name] = std::string(field.value());
  }
  return reply;
}

}  // namespace

struct TlsTestClient::Impl {
  explicit Impl(ClientOptions o) : options(std::move(o)), context(ssl::context::tls_client) {
    SSL_CTX* native = context.native_handle();
    if (options.minVersion != 0) SSL_CTX_set_min_proto_version(native, options.minVersion);
    if (options.maxVersion != 0) SSL_CTX_set_max_proto_version(native, options.maxVersion);
    if (!options.ciphers.empty()) SSL_CTX_set_cipher_list(native, options.ciphers.c_str());
    if (!options.caFile.empty()) {
      context.load_verify_file(options.caFile);
      context.set_verify_mode(ssl::verify_peer);
    } else {
      context.set_verify_mode(ssl::verify_none);
    }
  }

  void arm() { beast::get_lowest_layer(*stream).expires_after(options.timeout); }

  ClientOptions options;
  net::io_context ioc;
  ssl::context context;
  std::optional<beast::ssl_stream<beast::tcp_stream>> stream;
  beast::flat_buffer buffer;
};

TlsTestClient::TlsTestClient(ClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

TlsTestClient::~TlsTestClient() = default;

Result<void> TlsTestClient::connect(std::uint16_t port) {
  auto& s = impl_->stream.emplace(impl_->ioc, impl_->context);
  SSL* native = s.native_handle();
  if (!impl_->options.verifyHost.empty()) {
    boost::system::error_code ec;
    net::ip::make_address(impl_->options.verifyHost, ec);
    X509_VERIFY_PARAM* param = SSL_get0_param(native);
    if (!ec) {
      X509_VERIFY_PARAM_set1_ip_asc(param, impl_->options.verifyHost.c_str());
    } else {
      SSL_set_tlsext_host_name(native, impl_->options.verifyHost.c_str());
      X509_VERIFY_PARAM_set1_host(param, impl_->options.verifyHost.c_str(), 0);
    }
  }
  tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), port);
  impl_->arm();
  auto ec = runOne(impl_->ioc, [&](auto handler) {
    beast::get_lowest_layer(s).async_connect(endpoint, handler);
  });
  if (ec) return Error{"connect: " + ec.message()};
  beast::get_lowest_layer(s).socket().set_option(tcp::no_delay(true), ec);
  impl_->arm();
  ec = runOne(impl_->ioc,
              [&](auto handler) { s.async_handshake(ssl::stream_base::client, handler); });
  if (ec) return Error{"handshake: " + ec.message()};
  return {};
}

Result<void> TlsTestClient::writeRaw(const std::string& bytes) {
  impl_->arm();
  auto ec = runOne(impl_->ioc, [&](auto handler) {
    net::async_write(*impl_->stream, net::buffer(bytes), handler);
  });
  if (ec) return Error{"write: " + ec.message()};
  return {};
}

Result<HttpReply> TlsTestClient::readReply() {
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  impl_->arm();
  auto ec = runOne(impl_->ioc, [&](auto handler) {
    http::async_read(*impl_->stream, impl_->buffer, parser, handler);
  });
  if (ec) return Error{"read: " + ec.message()};
  return toReply(parser.get());
}

Result<HttpReply> TlsTestClient::request(const std::string& method, const std::string& target,
                                         const std::string& body,
                                         const std::map<std::string, std::string>& headers,
                                         unsigned version) {
  http::request<http::string_body> req(http::string_to_verb(method), target, version);
  req.set(http::field::host, "localhost");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.prepare_payload();
  impl_->arm();
  auto ec = runOne(impl_->ioc,
                   [&](auto handler) { http::async_write(*impl_->stream, req, handler); });
  if (ec) return Error{"write: " + ec.message()};
  return readReply();
}

bool TlsTestClient::closedByServer(std::chrono::milliseconds wait) {
  beast::get_lowest_layer(*impl_->stream).expires_after(wait);
  char byte = 0;
  auto ec = runOne(impl_->ioc, [&](auto handler) {
    impl_->stream->async_read_some(net::buffer(&byte, 1), handler);
  });
  return ec && ec != beast::error::timeout;
}

std::string TlsTestClient::peerCertificateSha256() const {
  X509* cert = SSL_get1_peer_certificate(impl_->stream->native_handle());
  if (cert == nullptr) return {};
  pki::openssl::X509Ptr owned(cert);
  return pki::openssl::certificateSha256(*owned);
}

std::string TlsTestClient::protocol() const {
  return SSL_get_version(impl_->stream->native_handle());
}

std::string TlsTestClient::cipher() const {
  return SSL_get_cipher_name(impl_->stream->native_handle());
}

RawExchange rawTcpExchange(std::uint16_t port, const std::string& bytes,
                           std::chrono::milliseconds wait) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  RawExchange result;
  stream.expires_after(wait);
  auto ec = runOne(ioc, [&](auto handler) {
    stream.async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), handler);
  });
  if (ec) return result;
  stream.expires_after(wait);
  ec = runOne(ioc, [&](auto handler) { net::async_write(stream, net::buffer(bytes), handler); });
  for (;;) {
    char buf[4096];
    std::size_t got = 0;
    stream.expires_after(wait);
    ec = runOne(ioc, [&](auto handler) {
      stream.async_read_some(net::buffer(buf), [&got, handler](beast::error_code e,
                                                               std::size_t n) mutable {
        got = n;
        handler(e);
      });
    });
    result.received.append(buf, got);
    if (ec) {
      result.closed = ec != beast::error::timeout;
      return result;
    }
  }
}

std::string pemFileSha256(const std::string& path) {
  auto cert = pki::openssl::readPemCertificate(readFile(path));
  if (!cert) throw std::runtime_error("no certificate in " + path);
  return pki::openssl::certificateSha256(*cert);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void replaceFile(const std::string& path, const std::string& content) {
  std::string tmp = path + ".new";
  overwriteFile(tmp, content);
  std::filesystem::rename(tmp, path);
}

void overwriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "podshaper-server-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace podshaper::server::testkit
