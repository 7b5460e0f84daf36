#include "kube/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace podshaper::kube {
namespace {

// base64 of "CA-PEM", "CERT-PEM", "KEY-PEM".
constexpr const char* kCaData = "Q0EtUEVN";
constexpr const char* kCertData = "Q0VSVC1QRU0=";
constexpr const char* kKeyData = "S0VZLVBFTQ==";

// A kubeconfig with two contexts; the placeholders are the user's body.
std::string kubeconfig(const std::string& clusterBody, const std::string& userBody,
                       const std::string& currentContext = "main") {
  return R"(apiVersion: v1
kind: Config
current-context: )" +
         currentContext + R"(
clusters:
- name: lab
  cluster:
)" + clusterBody +
         R"(
- name: other
  cluster:
    server: https://other.example:6443
contexts:
- name: main
  context:
    cluster: lab
    user: admin
    namespace: training
- name: ghost-user
  context:
    cluster: lab
    user: nobody
- name: ghost-cluster
  context:
    cluster: nowhere
    user: admin
- name: anonymous
  context:
    cluster: other
users:
- name: admin
  user:
)" + userBody + "\n";
}

FileReader fakeFiles(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> Result<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return makeError("\"" + path + "\": cannot read: No such file or directory");
    return it->second;
  };
}

// Fields left out of a case are empty (default member initializers keep
// -Wmissing-field-initializers quiet about designated initializers).
struct KubeconfigCase {
  std::string description = "";
  std::string yaml = "";
  std::string contextOverride = "";
  // Expected on success:
  std::string server = "", ca = "", cert = "", key = "", token = "", tokenFile = "", ns = "";
  bool insecure = false;
  // Expected on failure (a substring of the message); empty means success.
  std::string error = "";
};

class KubeconfigTest : public ::testing::TestWithParam<KubeconfigCase> {};

TEST_P(KubeconfigTest, Parses) {
  const KubeconfigCase& c = GetParam();
  const auto files = fakeFiles({
      {"/etc/kube/ca.crt", "CA-FROM-FILE"},
      {"/home/me/.kube/certs/admin.crt", "CERT-FROM-FILE"},
      {"/home/me/.kube/certs/admin.key", "KEY-FROM-FILE"},
      {"/abs/admin.key", "ABS-KEY"},
  });
  auto cfg = parseKubeconfig(c.yaml, "/home/me/.kube", c.contextOverride, files);
  if (!c.error.empty()) {
    ASSERT_FALSE(cfg.ok()) << c.description;
    EXPECT_NE(cfg.error().message.find(c.error), std::string::npos)
        << c.description << ": got \"" << cfg.error().message << "\", want it to contain \"" << c.error << "\"";
    return;
  }
  ASSERT_TRUE(cfg.ok()) << c.description << ": " << cfg.error().message;
  EXPECT_EQ(cfg->server, c.server) << c.description;
  EXPECT_EQ(cfg->caPem, c.ca) << c.description;
  EXPECT_EQ(cfg->clientCertPem, c.cert) << c.description;
  EXPECT_EQ(cfg->clientKeyPem, c.key) << c.description;
  EXPECT_EQ(cfg->bearerToken, c.token) << c.description;
  EXPECT_EQ(cfg->tokenFile, c.tokenFile) << c.description;
  EXPECT_EQ(cfg->defaultNamespace, c.ns) << c.description;
  EXPECT_EQ(cfg->insecureSkipTlsVerify, c.insecure) << c.description;
}

const std::string kDataCluster = std::string("    server: https://10.0.0.1:6443\n    certificate-authority-data: ") + kCaData;
const std::string kDataUser = std::string("    client-certificate-data: ") + kCertData + "\n    client-key-data: " + kKeyData;

INSTANTIATE_TEST_SUITE_P(
    Table, KubeconfigTest,
    ::testing::Values(
        KubeconfigCase{.description = "inline base64 data",
                       .yaml = kubeconfig(kDataCluster, kDataUser),
                       .server = "https://10.0.0.1:6443",
                       .ca = "CA-PEM",
                       .cert = "CERT-PEM",
                       .key = "KEY-PEM",
                       .ns = "training"},
        KubeconfigCase{.description = "files: absolute CA, client files relative to the kubeconfig's directory",
                       .yaml = kubeconfig("    server: https://lab:6443/\n    certificate-authority: /etc/kube/ca.crt",
                                          "    client-certificate: certs/admin.crt\n"
                                          "    client-key: ./certs/admin.key"),
                       .server = "https://lab:6443",
                       .ca = "CA-FROM-FILE",
                       .cert = "CERT-FROM-FILE",
                       .key = "KEY-FROM-FILE",
                       .ns = "training"},
        KubeconfigCase{.description = "data wins over a file",
                       .yaml = kubeconfig(kDataCluster + "\n    certificate-authority: /missing/ca.crt",
                                          kDataUser + "\n    client-key: /abs/admin.key"),
                       .server = "https://10.0.0.1:6443",
                       .ca = "CA-PEM",
                       .cert = "CERT-PEM",
                       .key = "KEY-PEM",
                       .ns = "training"},
        KubeconfigCase{.description = "token, tokenFile resolved but not read, insecure",
                       .yaml = kubeconfig("    server: https://lab:6443\n    insecure-skip-tls-verify: true",
                                          "    token: abc.def\n    tokenFile: tokens/sa"),
                       .server = "https://lab:6443",
                       .token = "abc.def",
                       .tokenFile = "/home/me/.kube/tokens/sa",
                       .ns = "training",
                       .insecure = true},
        KubeconfigCase{.description = "context override picks a context without a user",
                       .yaml = kubeconfig(kDataCluster, kDataUser),
                       .contextOverride = "anonymous",
                       .server = "https://other.example:6443"},
        KubeconfigCase{.description = "base64 data with line breaks",
                       .yaml = kubeconfig(kDataCluster, "    client-certificate-data: Q0VS\n      VC1QRU0=\n"
                                                        "    client-key-data: S0VZLVBFTQ"),
                       .server = "https://10.0.0.1:6443",
                       .ca = "CA-PEM",
                       .cert = "CERT-PEM",
                       .key = "KEY-PEM",
                       .ns = "training"},
        KubeconfigCase{.description = "missing context",
                       .yaml = kubeconfig(kDataCluster, kDataUser, "staging"),
                       .error = "kubeconfig: context \"staging\" not found"},
        KubeconfigCase{.description = "missing context given as override",
                       .yaml = kubeconfig(kDataCluster, kDataUser),
                       .contextOverride = "x",
                       .error = "kubeconfig: context \"x\" not found"},
        KubeconfigCase{.description = "no current-context",
                       .yaml = "apiVersion: v1\nkind: Config\nclusters: []\n",
                       .error = "no current-context"},
        KubeconfigCase{.description = "missing user",
                       .yaml = kubeconfig(kDataCluster, kDataUser, "ghost-user"),
                       .error = "kubeconfig: user \"nobody\" (context \"ghost-user\") not found"},
        KubeconfigCase{.description = "missing cluster",
                       .yaml = kubeconfig(kDataCluster, kDataUser, "ghost-cluster"),
                       .error = "kubeconfig: cluster \"nowhere\" (context \"ghost-cluster\") not found"},
        KubeconfigCase{.description = "bad base64",
                       .yaml = kubeconfig(kDataCluster, "    client-certificate-data: Q0VS*VC1QRU0=\n"
                                                        "    client-key-data: S0VZLVBFTQ=="),
                       .error = "user \"admin\": client-certificate-data is not valid base64"},
        KubeconfigCase{.description = "unreadable file",
                       .yaml = kubeconfig("    server: https://lab:6443\n    certificate-authority: ca.crt",
                                          kDataUser),
                       .error = "cluster \"lab\": certificate-authority: \"/home/me/.kube/ca.crt\": cannot read"},
        KubeconfigCase{.description = "certificate without key",
                       .yaml = kubeconfig(kDataCluster, std::string("    client-certificate-data: ") + kCertData),
                       .error = "user \"admin\" has a client certificate but no client key"},
        KubeconfigCase{.description = "no server",
                       .yaml = kubeconfig("    certificate-authority-data: Q0EtUEVN", kDataUser),
                       .error = "cluster \"lab\" has no server"},
        KubeconfigCase{.description = "server not a URL",
                       .yaml = kubeconfig("    server: lab:6443", kDataUser),
                       .error = "is not an http:// or https:// URL"},
        KubeconfigCase{.description = "insecure-skip-tls-verify not a bool",
                       .yaml = kubeconfig("    server: https://lab:6443\n    insecure-skip-tls-verify: maybe", kDataUser),
                       .error = "cluster \"lab\": insecure-skip-tls-verify is not true or false"},
        KubeconfigCase{.description = "exec plugin only",
                       .yaml = kubeconfig(kDataCluster, "    exec:\n      command: aws"),
                       .error = "exec credential plugin"},
        KubeconfigCase{.description = "not YAML",
                       .yaml = "clusters: [unclosed",
                       .error = "kubeconfig: invalid YAML"},
        KubeconfigCase{.description = "not a map",
                       .yaml = "- a\n- b\n",
                       .error = "kubeconfig: not a YAML map"}),
    [](const ::testing::TestParamInfo<KubeconfigCase>& info) {
      std::string name;
      for (char ch : info.param.description) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return name;
    });


class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kube_config_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  void write(const std::string& name, const std::string& content) const {
    std::filesystem::create_directories(std::filesystem::path(path_ + "/" + name).parent_path());
    std::ofstream(path_ + "/" + name) << content;
  }

 private:
  std::string path_;
};

TEST(LoadKubeconfig, ReadsRelativeFilesNextToTheKubeconfig) {
  TempDir dir;
  dir.write("certs/ca.crt", "CA");
  dir.write("config", kubeconfig("    server: https://lab:6443\n    certificate-authority: certs/ca.crt",
                                 "    token: t0k3n"));
  auto cfg = loadKubeconfig(dir.path() + "/config");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->caPem, "CA");
  EXPECT_EQ(cfg->bearerToken, "t0k3n");
}

TEST(LoadKubeconfig, MissingFileSaysWhich) {
  auto cfg = loadKubeconfig("/nonexistent/kubeconfig");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.error().message.find("/nonexistent/kubeconfig"), std::string::npos) << cfg.error().message;
}

TEST(InClusterConfig, ReadsServiceAccountFiles) {
  TempDir dir;
  dir.write("token", "header.payload.sig\n");
  dir.write("ca.crt", "CLUSTER-CA");
  dir.write("namespace", "podshaper-system");
  auto cfg = inClusterConfig("10.96.0.1", "443", dir.path());
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->bearerToken, "header.payload.sig");
  EXPECT_EQ(cfg->tokenFile, dir.path() + "/token");
  EXPECT_EQ(cfg->caPem, "CLUSTER-CA");
  EXPECT_EQ(cfg->defaultNamespace, "podshaper-system");
}

TEST(InClusterConfig, BracketsIpv6) {
  TempDir dir;
  dir.write("token", "t");
  dir.write("ca.crt", "CA");
  auto cfg = inClusterConfig("fd00::1", "443", dir.path());
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://[fd00::1]:443");
}

TEST(InClusterConfig, Errors) {
  TempDir dir;
  EXPECT_NE(inClusterConfig("", "", dir.path()).error().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  EXPECT_NE(inClusterConfig("10.96.0.1", "443", dir.path()).error().message.find("token"), std::string::npos);
  dir.write("token", "t");
  EXPECT_NE(inClusterConfig("10.96.0.1", "443", dir.path()).error().message.find("ca.crt"), std::string::npos);
}

}  // namespace
}  // namespace podshaper::kube
