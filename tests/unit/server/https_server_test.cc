#include "server/https_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <map>
#include <stdexcept>
#include <thread>

#include "pki/selfsigned.h"
#include "tests/unit/server/tls_test_client.h"
#include "tests/unit/support/eventually.h"

namespace podshaper::server {
namespace {

using namespace std::chrono_literals;
using testkit::ClientOptions;
using testkit::TlsTestClient;

void makeCert(const std::string& cert, const std::string& key, const std::string& cn = "test") {
  auto written = pki::writeSelfSignedCert(cert, key, cn, {"localhost", "127.0.0.1"}, 1);
  if (!written) throw std::runtime_error(written.error().message);
}

// A plain TCP connection to 127.0.0.1:port that sends nothing (no TLS hello);
// -1 when the connection is refused.
int tcpConnect(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool tcpConnects(std::uint16_t port) {
  int fd = tcpConnect(port);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Polls `condition` until it holds or `limit` passes.
using support::eventually;

class HttpsServerTest : public ::testing::Test {
 protected:
  void SetUp() override { makeCert(certFile(), keyFile()); }

  std::string certFile() const { return dir_.file("tls.crt"); }
  std::string keyFile() const { return dir_.file("tls.key"); }

  ServerOptions options() const {
    ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.certFile = certFile();
    o.keyFile = keyFile();
    o.maxBodyBytes = 1024;
    o.certCheckInterval = 20ms;
    return o;
  }

  // A server with the routes every test uses.
  HttpsServer& start(ServerOptions o) {
    server_ = std::make_unique<HttpsServer>(std::move(o), metrics_);
    server_->route("GET", "/healthz", [](const Request&) { return Response{.body = "ok\n"}; });
    server_->route("POST", "/echo", [](const Request& r) {
      return Response{.status = 201,
                      .contentType = "application/json",
                      .body = r.body + "|" + r.contentType + "|" + r.query};
    });
    server_->route("GET", "/boom", [](const Request&) -> Response {
      throw std::runtime_error("handler failed");
    });
    server_->route("GET", "/bad-status", [](const Request&) { return Response{.status = 42}; });
    server_->route("GET", "/no-content",
                   [](const Request&) { return Response{.status = 204, .body = "dropped"}; });
    server_->route("GET", "/slow", [this](const Request&) {
      slowEntered_ = true;
      std::this_thread::sleep_for(slowFor_);
      return Response{.body = "slow\n"};
    });
    auto started = server_->start();
    if (!started) throw std::runtime_error(started.error().message);
    return *server_;
  }
  HttpsServer& start() { return start(options()); }

  std::uint16_t port() const { return server_->boundPort(); }

  // A fresh TLS connection that must succeed.
  std::unique_ptr<TlsTestClient> connect(ClientOptions o = {}) {
    auto client = std::make_unique<TlsTestClient>(o);
    auto connected = client->connect(port());
    if (!connected) throw std::runtime_error(connected.error().message);
    return client;
  }

  int get(const std::string& target) {
    auto reply = connect()->request("GET", target);
    return reply ? reply->status : -1;
  }

  // shutdown() on another thread, as serve's main thread calls it.
  std::future<bool> shutdownAsync(std::chrono::milliseconds timeout) {
    return std::async(std::launch::async, [this, timeout] { return server_->shutdown(timeout); });
  }

  testkit::TempDir dir_;
  std::shared_ptr<metrics::Registry> metrics_ = std::make_shared<metrics::Registry>();
  std::unique_ptr<HttpsServer> server_;
  std::atomic<bool> slowEntered_{false};
  std::chrono::milliseconds slowFor_{1000};
};

TEST_F(HttpsServerTest, HealthzAnswers200) {
  start();
  ASSERT_NE(port(), 0);
  auto reply = connect()->request("GET", "/healthz");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "ok\n");
  EXPECT_EQ(reply->headers["content-type"], "text/plain; charset=utf-8");
}

TEST_F(HttpsServerTest, PostBodyReachesTheHandlerAndComesBack) {
  start();
  auto reply = connect()->request("POST", "/echo?timeout=10s", R"({"kind":"AdmissionReview"})",
                                  {{"Content-Type", "application/json"}});
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 201);
  EXPECT_EQ(reply->body, R"({"kind":"AdmissionReview"}|application/json|timeout=10s)");
  EXPECT_EQ(reply->headers["content-type"], "application/json");
}

TEST_F(HttpsServerTest, UnknownPathIs404) {
  start();
  EXPECT_EQ(get("/nope"), 404);
}

TEST_F(HttpsServerTest, WrongMethodIs405WithAllow) {
  start();
  auto reply = connect()->request("DELETE", "/healthz");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 405);
  EXPECT_EQ(reply->headers["allow"], "GET");
}

TEST_F(HttpsServerTest, BodyAtTheLimitIsAccepted) {
  start();
  auto reply = connect()->request("POST", "/echo", std::string(1024, 'x'));
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 201);
}

TEST_F(HttpsServerTest, OversizedBodyIs413AndTheConnectionCloses) {
  start();
  auto client = connect();
  // Only the header and a little of the body: the server must answer from the
  // Content-Length alone.
  ASSERT_TRUE(client->writeRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n" +
                               std::string(100, 'x')));
  auto reply = client->readReply();
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 413);
  EXPECT_FALSE(reply->keepAlive);
  EXPECT_TRUE(client->closedByServer(2s));
  EXPECT_EQ(get("/healthz"), 200);
}

TEST_F(HttpsServerTest, ChunkedBodyOverTheLimitIs413) {
  start();
  auto client = connect();
  std::string chunk(800, 'y');
  ASSERT_TRUE(client->writeRaw(
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n320\r\n" + chunk +
      "\r\n320\r\n" + chunk + "\r\n0\r\n\r\n"));
  auto reply = client->readReply();
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 413);
}

TEST_F(HttpsServerTest, ExpectContinueGets100ThenTheResponse) {
  start();
  auto client = connect();
  ASSERT_TRUE(client->writeRaw(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"));
  auto interim = client->readReply();
  ASSERT_TRUE(interim) << interim.error().message;
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(client->writeRaw("hi"));
  auto reply = client->readReply();
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 201);
  EXPECT_EQ(reply->body, "hi||");
}

TEST_F(HttpsServerTest, HandlerExceptionIs500AndTheServerGoesOn) {
  start();
  auto client = connect();
  auto reply = client->request("GET", "/boom");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 500);
  EXPECT_EQ(reply->body, "internal error\n");
  auto again = client->request("GET", "/healthz");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->status, 200);
}

TEST_F(HttpsServerTest, InvalidHandlerResponsesAreMadeSafe) {
  start();
  auto client = connect();
  auto bad = client->request("GET", "/bad-status");
  ASSERT_TRUE(bad) << bad.error().message;
  EXPECT_EQ(bad->status, 500);
  auto noContent = client->request("GET", "/no-content");
  ASSERT_TRUE(noContent) << noContent.error().message;
  EXPECT_EQ(noContent->status, 204);
  EXPECT_EQ(noContent->body, "");
  EXPECT_EQ(client->request("GET", "/healthz")->status, 200);
}

// The session writes its responses itself: the fields Beast would write, for either version.
TEST_F(HttpsServerTest, ResponsesCarryTheFieldsEachVersionNeeds) {
  start();
  auto client = connect();
  auto reply = client->request("POST", "/echo", "abc");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 201);
  EXPECT_EQ(reply->headers["content-length"], "5");  // "abc||"
  EXPECT_EQ(reply->headers["server"], "podshaper");
  EXPECT_EQ(reply->headers["x-content-type-options"], "nosniff");
  EXPECT_EQ(reply->headers.count("connection"), 0u);  // HTTP/1.1 keeps the connection by default
  EXPECT_TRUE(reply->keepAlive);
  auto noContent = client->request("GET", "/no-content");
  ASSERT_TRUE(noContent) << noContent.error().message;
  EXPECT_EQ(noContent->headers.count("content-length"), 0u);

  auto old = connect();
  auto kept = old->request("GET", "/healthz", "", {{"Connection", "keep-alive"}}, 10);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(kept->headers["connection"], "keep-alive");  // HTTP/1.0 says so when it keeps it
  EXPECT_TRUE(kept->keepAlive);
  auto last = old->request("GET", "/healthz", "", {}, 10);
  ASSERT_TRUE(last) << last.error().message;
  EXPECT_EQ(last->headers.count("connection"), 0u);
  EXPECT_FALSE(last->keepAlive);
  EXPECT_TRUE(old->closedByServer(2s));
}

TEST_F(HttpsServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  start();
  auto client = connect();
  for (int i = 0; i < 5; ++i) {
    auto reply = client->request("POST", "/echo", "n" + std::to_string(i));
    ASSERT_TRUE(reply) << "request " << i << ": " << reply.error().message;
    EXPECT_EQ(reply->body, "n" + std::to_string(i) + "||");
    EXPECT_TRUE(reply->keepAlive);
  }
  EXPECT_FALSE(client->closedByServer(50ms));
}

TEST_F(HttpsServerTest, PipelinedRequestsAreAnsweredInOrder) {
  start();
  auto client = connect();
  ASSERT_TRUE(client->writeRaw(
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto first = client->readReply();
  auto second = client->readReply();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(second->status, 404);
}

TEST_F(HttpsServerTest, Http10RequestClosesAfterTheResponse) {
  start();
  auto client = connect();
  auto reply = client->request("GET", "/healthz", "", {}, 10);
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  EXPECT_TRUE(client->closedByServer(2s));
}

TEST_F(HttpsServerTest, Tls12ClientGetsAnEcdheAeadCipher) {
  start();
  auto client = connect({.minVersion = TLS1_2_VERSION, .maxVersion = TLS1_2_VERSION});
  EXPECT_EQ(client->protocol(), "TLSv1.2");
  std::string cipher = client->cipher();
  EXPECT_EQ(cipher.rfind("ECDHE-", 0), 0u) << cipher;
  EXPECT_TRUE(cipher.find("GCM") != std::string::npos ||
              cipher.find("CHACHA20") != std::string::npos)
      << cipher;
}

TEST_F(HttpsServerTest, Tls13ClientIsServed) {
  start();
  auto client = connect({.minVersion = TLS1_3_VERSION});
  EXPECT_EQ(client->protocol(), "TLSv1.3");
  auto reply = client->request("GET", "/healthz");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
}

TEST_F(HttpsServerTest, Tls11ClientIsRefused) {
  start();
  // SECLEVEL=0: without it OpenSSL 3 would not even offer TLS 1.1, and the
  // test would prove nothing about the server.
  TlsTestClient client({.minVersion = TLS1_1_VERSION,
                        .maxVersion = TLS1_1_VERSION,
                        .ciphers = "DEFAULT:@SECLEVEL=0"});
  auto connected = client.connect(port());
  ASSERT_FALSE(connected);
  EXPECT_NE(connected.error().message.find("protocol version"), std::string::npos)
      << connected.error().message;
  EXPECT_EQ(get("/healthz"), 200);
}

TEST_F(HttpsServerTest, Tls12ClientWithOnlyCbcCiphersIsRefused) {
  start();
  TlsTestClient client({.minVersion = TLS1_2_VERSION,
                        .maxVersion = TLS1_2_VERSION,
                        .ciphers = "ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA:AES128-SHA"});
  auto connected = client.connect(port());
  ASSERT_FALSE(connected);
  EXPECT_NE(connected.error().message.find("handshake failure"), std::string::npos)
      << connected.error().message;
}

TEST_F(HttpsServerTest, ClientVerifyingTheCertificateAgainstItselfAsCaSucceeds) {
  start();
  auto byIp = connect({.caFile = certFile(), .verifyHost = "127.0.0.1"});
  EXPECT_EQ(byIp->request("GET", "/healthz")->status, 200);
  auto byName = connect({.caFile = certFile(), .verifyHost = "localhost"});
  EXPECT_EQ(byName->request("GET", "/healthz")->status, 200);
  TlsTestClient wrongName({.caFile = certFile(), .verifyHost = "evil.example"});
  EXPECT_FALSE(wrongName.connect(port()));
}

TEST_F(HttpsServerTest, PlainHttpAndGarbageOnTheTlsPortAreClosed) {
  start();
  auto plainHttp =
      testkit::rawTcpExchange(port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 2000ms);
  EXPECT_TRUE(plainHttp.closed);
  EXPECT_EQ(plainHttp.received.find("ok"), std::string::npos);
  auto garbage = testkit::rawTcpExchange(port(), std::string("\x16\x03\x01\xff\xff garbage", 14),
                                         2000ms);
  EXPECT_TRUE(garbage.closed);
  EXPECT_EQ(get("/healthz"), 200);
  EXPECT_NE(metrics_->render().find("podshaper_tls_handshake_errors_total 2\n"),
            std::string::npos);
}

TEST_F(HttpsServerTest, MalformedRequestIs400) {
  start();
  auto client = connect();
  ASSERT_TRUE(client->writeRaw("NOT A REQUEST\r\n\r\n"));
  auto reply = client->readReply();
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 400);
}

TEST_F(HttpsServerTest, ClientTricklingARequestIsCutOffAfterTheReadTimeout) {
  ServerOptions o = options();
  o.readTimeout = 1s;
  start(o);
  auto client = connect();
  ASSERT_TRUE(client->writeRaw("GET /healthz HTTP/1.1\r\nHo"));
  auto began = std::chrono::steady_clock::now();
  EXPECT_TRUE(client->closedByServer(3s));
  EXPECT_LT(std::chrono::steady_clock::now() - began, 2500ms);
  EXPECT_EQ(get("/healthz"), 200);
}

TEST_F(HttpsServerTest, ConnectionsBeyondMaxConnectionsAreClosed) {
  ServerOptions o = options();
  o.maxConnections = 2;
  start(o);
  auto a = connect();
  auto b = connect();
  TlsTestClient third;
  EXPECT_FALSE(third.connect(port()));
  a.reset();
  // The server notices the close on its side before it admits another.
  EXPECT_TRUE(eventually([&] {
    TlsTestClient again;
    return static_cast<bool>(again.connect(port()));
  }));
  EXPECT_NE(metrics_->render().find("podshaper_http_connections_rejected_total "),
            std::string::npos);
}

TEST_F(HttpsServerTest, RequestsAreCountedByPathAndCode) {
  start();
  auto client = connect();
  ASSERT_TRUE(client->request("GET", "/healthz"));
  ASSERT_TRUE(client->request("GET", "/healthz"));
  ASSERT_TRUE(client->request("GET", "/made/up/path"));
  ASSERT_TRUE(client->request("GET", "/boom"));
  std::string text = metrics_->render();
  EXPECT_NE(text.find("podshaper_http_requests_total{code=\"200\",path=\"/healthz\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("podshaper_http_requests_total{code=\"404\",path=\"other\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("podshaper_http_requests_total{code=\"500\",path=\"/boom\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("podshaper_http_request_duration_seconds_count{path=\"/healthz\"} 2\n"),
            std::string::npos);
  EXPECT_NE(
      text.find("podshaper_http_request_duration_seconds_bucket{path=\"/healthz\",le=\"0.0005\"}"),
      std::string::npos);
  EXPECT_EQ(text.find("/made/up/path"), std::string::npos);
  EXPECT_NE(text.find("podshaper_tls_certificate_reloads_total 0\n"), std::string::npos);
}

TEST_F(HttpsServerTest, RotatedCertificateIsServedToNewConnectionsWithoutRestart) {
  start();
  std::string first = testkit::pemFileSha256(certFile());
  auto before = connect();
  EXPECT_EQ(before->peerCertificateSha256(), first);

  testkit::TempDir next;
  makeCert(next.file("tls.crt"), next.file("tls.key"), "rotated");
  testkit::replaceFile(keyFile(), testkit::readFile(next.file("tls.key")));
  testkit::replaceFile(certFile(), testkit::readFile(next.file("tls.crt")));
  std::string second = testkit::pemFileSha256(certFile());
  ASSERT_NE(first, second);

  ASSERT_TRUE(eventually([&] { return server_->certReloads() == 1; }));
  EXPECT_EQ(connect()->peerCertificateSha256(), second);
  // The connection made before the rotation carries on with its own context.
  auto reply = before->request("GET", "/healthz");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  // The reloader counts before the server's metric does (another thread): wait for both.
  EXPECT_TRUE(eventually(
      [&] { return metrics_->render().find("podshaper_tls_certificate_reloads_total 1\n") != std::string::npos; }));
}

TEST_F(HttpsServerTest, InvalidNewCertificateIsIgnoredAndTheOldOneKeepsServing) {
  start();
  std::string original = testkit::pemFileSha256(certFile());
  std::string goodCert = testkit::readFile(certFile());

  // A writer caught half-way through the certificate.
  testkit::overwriteFile(certFile(), goodCert.substr(0, goodCert.size() / 2));
  ASSERT_TRUE(eventually([&] {
    return metrics_->render().find("podshaper_tls_certificate_reload_errors_total 0\n") ==
           std::string::npos;
  }));
  EXPECT_EQ(connect()->peerCertificateSha256(), original);

  // A new certificate whose key has not been written yet.
  testkit::TempDir other;
  makeCert(other.file("tls.crt"), other.file("tls.key"), "other");
  testkit::replaceFile(certFile(), testkit::readFile(other.file("tls.crt")));
  std::this_thread::sleep_for(100ms);  // several checks
  EXPECT_EQ(server_->certReloads(), 0u);
  EXPECT_EQ(connect()->peerCertificateSha256(), original);

  // Its key arrives: now it loads.
  testkit::replaceFile(keyFile(), testkit::readFile(other.file("tls.key")));
  ASSERT_TRUE(eventually([&] { return server_->certReloads() == 1; }));
  EXPECT_EQ(connect()->peerCertificateSha256(), testkit::pemFileSha256(other.file("tls.crt")));
}

// A server on a free loopback port with a new certificate in `dir`.
ServerOptions withNewCert(const testkit::TempDir& dir) {
  makeCert(dir.file("tls.crt"), dir.file("tls.key"));
  return {.host = "127.0.0.1", .port = 0, .certFile = dir.file("tls.crt"), .keyFile = dir.file("tls.key")};
}

TEST(HttpsServerStartTest, MissingCertificateIsAClearError) {
  testkit::TempDir dir;
  HttpsServer server({.host = "127.0.0.1",
                      .port = 0,
                      .certFile = dir.file("missing.crt"),
                      .keyFile = dir.file("missing.key")},
                     nullptr);
  auto started = server.start();
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message.find("cannot read certificate file \"" +
                                        dir.file("missing.crt") + "\""),
            std::string::npos)
      << started.error().message;
  EXPECT_NE(started.error().message.find("No such file"), std::string::npos);
}

TEST(HttpsServerStartTest, KeyNotMatchingTheCertificateIsAClearError) {
  testkit::TempDir dir;
  makeCert(dir.file("a.crt"), dir.file("a.key"));
  makeCert(dir.file("b.crt"), dir.file("b.key"));
  HttpsServer server(
      {.host = "127.0.0.1", .port = 0, .certFile = dir.file("a.crt"), .keyFile = dir.file("b.key")},
      nullptr);
  auto started = server.start();
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message.find("does not match"), std::string::npos)
      << started.error().message;
}

TEST(HttpsServerStartTest, PortInUseIsAClearError) {
  testkit::TempDir dir;
  ServerOptions o = withNewCert(dir);
  o.reusePort = false;  // another program's socket, which does not share its port
  HttpsServer first(o, nullptr);
  ASSERT_TRUE(first.start());
  o.port = first.boundPort();
  o.reusePort = true;
  HttpsServer second(o, nullptr);
  auto started = second.start();
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message.find("cannot bind 127.0.0.1:" + std::to_string(o.port)),
            std::string::npos)
      << started.error().message;
}

// Two replicas on one host (SO_REUSEPORT): both listen on the port, and the
// kernel gives each a share of the new connections.
TEST(HttpsServerStartTest, TwoServersShareOnePortAndBothGetConnections) {
  testkit::TempDir dir;
  ServerOptions o = withNewCert(dir);
  HttpsServer first(o, nullptr);
  first.route("GET", "/who", [](const Request&) { return Response{.body = "first"}; });
  ASSERT_TRUE(first.start());
  o.port = first.boundPort();
  HttpsServer second(o, nullptr);
  second.route("GET", "/who", [](const Request&) { return Response{.body = "second"}; });
  auto started = second.start();
  ASSERT_TRUE(started) << started.error().message;
  EXPECT_EQ(second.boundPort(), first.boundPort());

  std::map<std::string, int> answers;
  for (int i = 0; i < 40; ++i) {  // all 40 to one of two: 2^-39
    TlsTestClient client;
    ASSERT_TRUE(client.connect(o.port));
    auto reply = client.request("GET", "/who");
    ASSERT_TRUE(reply) << reply.error().message;
    ++answers[reply->body];
  }
  EXPECT_GT(answers["first"], 0);
  EXPECT_GT(answers["second"], 0);

  // One replica stops; the other keeps the port and takes every connection.
  first.stop();
  for (int i = 0; i < 5; ++i) {
    TlsTestClient client;
    ASSERT_TRUE(client.connect(o.port));
    auto reply = client.request("GET", "/who");
    ASSERT_TRUE(reply) << reply.error().message;
    EXPECT_EQ(reply->body, "second");
  }
}

TEST(HttpsServerStartTest, HostThatIsNotAnAddressIsAClearError) {
  testkit::TempDir dir;
  makeCert(dir.file("tls.crt"), dir.file("tls.key"));
  HttpsServer server({.host = "not an address",
                      .port = 0,
                      .certFile = dir.file("tls.crt"),
                      .keyFile = dir.file("tls.key")},
                     nullptr);
  auto started = server.start();
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message.find("is not an IP address"), std::string::npos);
}

TEST(HttpsServerStartTest, StopIsIdempotentAndClosesOpenConnections) {
  testkit::TempDir dir;
  makeCert(dir.file("tls.crt"), dir.file("tls.key"));
  HttpsServer server({.host = "127.0.0.1",
                      .port = 0,
                      .certFile = dir.file("tls.crt"),
                      .keyFile = dir.file("tls.key")},
                     nullptr);
  ASSERT_TRUE(server.start());
  TlsTestClient client;
  ASSERT_TRUE(client.connect(server.boundPort()));
  server.stop();
  server.stop();
  EXPECT_TRUE(client.closedByServer(2s));
  EXPECT_FALSE(server.start());
}

// Graceful shutdown (beginDrain, shutdown).

TEST_F(HttpsServerTest, RequestInFlightWhenShutdownBeginsIsAnsweredAndNewConnectionsAreRefused) {
  start();
  auto client = connect();
  ASSERT_TRUE(client->writeRaw("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(eventually([&] { return slowEntered_.load(); }));
  auto began = std::chrono::steady_clock::now();
  auto drained = shutdownAsync(5s);
  // The listener closes at once, while the request is still being handled.
  EXPECT_TRUE(eventually([&] { return !tcpConnects(port()); }, 800ms));
  auto reply = client->readReply();
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "slow\n");
  EXPECT_FALSE(reply->keepAlive);  // Connection: close
  EXPECT_TRUE(client->closedByServer(2s));
  client.reset();  // closes our side, as a client told Connection: close does
  EXPECT_TRUE(drained.get());
  EXPECT_LT(std::chrono::steady_clock::now() - began, 2500ms);
  EXPECT_FALSE(tcpConnects(port()));
}

TEST_F(HttpsServerTest, WhileDrainingKeptAliveConnectionsGetConnectionClose) {
  start();
  auto client = connect();
  auto before = client->request("GET", "/healthz");
  ASSERT_TRUE(before) << before.error().message;
  EXPECT_TRUE(before->keepAlive);
  server_->beginDrain();
  auto during = client->request("GET", "/healthz");
  ASSERT_TRUE(during) << during.error().message;
  EXPECT_EQ(during->status, 200);
  EXPECT_FALSE(during->keepAlive);
  EXPECT_EQ(during->headers["connection"], "close");
  EXPECT_TRUE(client->closedByServer(2s));
  // Still listening: a new connection is served (and told to close too).
  auto fresh = connect()->request("GET", "/healthz");
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_EQ(fresh->status, 200);
  EXPECT_FALSE(fresh->keepAlive);
}

TEST_F(HttpsServerTest, ShutdownClosesIdleKeptAliveConnectionsAtOnce) {
  start();
  auto idle = connect();
  ASSERT_TRUE(idle->request("GET", "/healthz"));
  auto began = std::chrono::steady_clock::now();
  auto drained = shutdownAsync(10s);
  EXPECT_TRUE(idle->closedByServer(2s));  // the close_notify
  idle.reset();
  EXPECT_TRUE(drained.get());
  EXPECT_LT(std::chrono::steady_clock::now() - began, 1500ms);
}

TEST_F(HttpsServerTest, ConnectionWithoutARequestYetGetsTheGraceToSendOne) {
  start();
  auto client = connect();  // handshake done, no request yet
  auto drained = shutdownAsync(10s);
  ASSERT_TRUE(eventually([&] { return !tcpConnects(port()); }, 1000ms));
  std::this_thread::sleep_for(300ms);
  auto reply = client->request("GET", "/healthz");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  EXPECT_FALSE(reply->keepAlive);
  client.reset();
  EXPECT_TRUE(drained.get());
}

TEST_F(HttpsServerTest, SilentConnectionsAreClosedAfterTheGrace) {
  start();
  int silent = tcpConnect(port());  // never sends a TLS hello
  ASSERT_GE(silent, 0);
  auto handshaken = connect();  // never sends a request
  auto began = std::chrono::steady_clock::now();
  EXPECT_TRUE(server_->shutdown(10s));
  auto took = std::chrono::steady_clock::now() - began;
  EXPECT_GE(took, HttpsServer::kDrainGrace - 100ms);
  // + 2 s for a close_notify left unanswered, + room for a slow machine (make test-sanitize):
  // well before the 10 s the shutdown was given.
  EXPECT_LT(took, HttpsServer::kDrainGrace + 4s);
  char byte = 0;
  EXPECT_EQ(::recv(silent, &byte, 1, 0), 0);  // closed by the server
  ::close(silent);
  // Cut off for the shutdown, not a failed handshake.
  EXPECT_NE(metrics_->render().find("podshaper_tls_handshake_errors_total 0\n"),
            std::string::npos);
}

TEST_F(HttpsServerTest, ShutdownGivesUpAtItsTimeoutAndStops) {
  slowFor_ = 1500ms;
  start();
  auto client = connect();
  ASSERT_TRUE(client->writeRaw("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(eventually([&] { return slowEntered_.load(); }));
  auto began = std::chrono::steady_clock::now();
  EXPECT_FALSE(server_->shutdown(300ms));
  // stop() joins the handler's thread: it waited for the handler, not longer.
  auto took = std::chrono::steady_clock::now() - began;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 2500ms);
  // Whether the handler's answer got out before the event loop stopped is
  // luck; the connection is closed either way.
  (void)client->readReply();
  EXPECT_TRUE(client->closedByServer(2s));
}

}  // namespace
}  // namespace podshaper::server
