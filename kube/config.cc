#include "kube/config.h"

#include "base/base64.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace podshaper::kube {
namespace {

std::string inQuotes(const std::string& s) { return "\"" + s + "\""; }

// A named entry of `clusters`, `contexts` or `users`; returns the inner map
// (`cluster:`, `context:`, `user:`), or an undefined node when absent.
YAML::Node findNamed(const YAML::Node& list, const std::string& name, const char* inner) {
  if (!list || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& entry : list) {
    if (!entry.IsMap()) continue;
    const YAML::Node n = entry["name"];
    if (n && n.IsScalar() && n.as<std::string>() == name) {
      const YAML::Node in = entry[inner];
      // `user: {}` and an entry without a body are both "no settings".
      return in ? in : YAML::Node(YAML::NodeType::Map);
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// A string field; absent is "". `where` is e.g. `cluster "kind"` for messages.
Result<std::string> stringField(const YAML::Node& map, const char* key, const std::string& where) {
  if (!map.IsMap()) return std::string();
  const YAML::Node n = map[key];
  if (!n || n.IsNull()) return std::string();
  if (!n.IsScalar()) return makeError("kubeconfig: " + where + ": " + key + " is not a string");
  return n.as<std::string>();
}

std::string resolvePath(const std::string& baseDir, const std::string& path) {
  if (path.empty() || baseDir.empty()) return path;
  std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  return (std::filesystem::path(baseDir) / p).lexically_normal().string();
}

// `<key>-data` (base64) wins over `<key>` (a file), as in kubectl.
Result<std::string> pemField(const YAML::Node& map, const std::string& key, const std::string& where,
                             const std::string& baseDir, const FileReader& readFile) {
  auto data = stringField(map, (key + "-data").c_str(), where);
  if (!data) return data.error();
  if (!data->empty()) {
    auto decoded = base64Decode(*data);
    if (!decoded) {
      return makeError("kubeconfig: " + where + ": " + key + "-data is not valid base64 (" +
                       decoded.error().message + ")");
    }
    return decoded;
  }
  auto file = stringField(map, key.c_str(), where);
  if (!file) return file.error();
  if (file->empty()) return std::string();
  auto content = readFile(resolvePath(baseDir, *file));
  if (!content) return makeError("kubeconfig: " + where + ": " + key + ": " + content.error().message);
  return content;
}

Result<ClientConfig> parseKubeconfigNode(const YAML::Node& root, const std::string& baseDir,
                                         const std::string& contextOverride, const FileReader& readFile) {
  if (!root.IsMap()) return makeError("kubeconfig: not a YAML map");

  std::string contextName = contextOverride;
  if (contextName.empty()) {
    auto current = stringField(root, "current-context", "top level");
    if (!current) return current.error();
    contextName = *current;
  }
  if (contextName.empty()) return makeError("kubeconfig: no current-context set and no context given");

  const YAML::Node context = findNamed(root["contexts"], contextName, "context");
  if (!context.IsDefined()) return makeError("kubeconfig: context " + inQuotes(contextName) + " not found");
  const std::string contextWhere = "context " + inQuotes(contextName);

  auto clusterName = stringField(context, "cluster", contextWhere);
  if (!clusterName) return clusterName.error();
  if (clusterName->empty()) return makeError("kubeconfig: " + contextWhere + " names no cluster");
  auto userName = stringField(context, "user", contextWhere);
  if (!userName) return userName.error();
  auto ns = stringField(context, "namespace", contextWhere);
  if (!ns) return ns.error();

  const YAML::Node cluster = findNamed(root["clusters"], *clusterName, "cluster");
  if (!cluster.IsDefined()) {
    return makeError("kubeconfig: cluster " + inQuotes(*clusterName) + " (" + contextWhere + ") not found");
  }
  const std::string clusterWhere = "cluster " + inQuotes(*clusterName);

  ClientConfig cfg;
  cfg.defaultNamespace = *ns;

  auto server = stringField(cluster, "server", clusterWhere);
  if (!server) return server.error();
  if (server->empty()) return makeError("kubeconfig: " + clusterWhere + " has no server");
  if (server->rfind("https://", 0) != 0 && server->rfind("http://", 0) != 0) {
    return makeError("kubeconfig: " + clusterWhere + ": server " + inQuotes(*server) +
                     " is not an http:// or https:// URL");
  }
  while (server->size() > 1 && server->back() == '/') server->pop_back();
  cfg.server = *server;

  auto ca = pemField(cluster, "certificate-authority", clusterWhere, baseDir, readFile);
  if (!ca) return ca.error();
  cfg.caPem = *ca;
  if (cluster.IsMap() && cluster["insecure-skip-tls-verify"]) {
    bool insecure = false;
    if (!YAML::convert<bool>::decode(cluster["insecure-skip-tls-verify"], insecure)) {
      return makeError("kubeconfig: " + clusterWhere + ": insecure-skip-tls-verify is not true or false");
    }
    cfg.insecureSkipTlsVerify = insecure;
  }

  if (userName->empty()) return cfg;  // anonymous, as kubectl allows
  const YAML::Node user = findNamed(root["users"], *userName, "user");
  if (!user.IsDefined()) {
    return makeError("kubeconfig: user " + inQuotes(*userName) + " (" + contextWhere + ") not found");
  }
  const std::string userWhere = "user " + inQuotes(*userName);

  auto cert = pemField(user, "client-certificate", userWhere, baseDir, readFile);
  if (!cert) return cert.error();
  auto key = pemField(user, "client-key", userWhere, baseDir, readFile);
  if (!key) return key.error();
  if (cert->empty() != key->empty()) {
    return makeError("kubeconfig: " + userWhere + " has a client " + (cert->empty() ? "key" : "certificate") +
                     " but no client " + (cert->empty() ? "certificate" : "key"));
  }
  cfg.clientCertPem = *cert;
  cfg.clientKeyPem = *key;

  auto token = stringField(user, "token", userWhere);
  if (!token) return token.error();
  cfg.bearerToken = *token;
  auto tokenFile = stringField(user, "tokenFile", userWhere);
  if (!tokenFile) return tokenFile.error();
  cfg.tokenFile = resolvePath(baseDir, *tokenFile);

  const bool hasCredentials = !cfg.clientCertPem.empty() || !cfg.bearerToken.empty() || !cfg.tokenFile.empty();
  if (!hasCredentials && user.IsMap()) {
    if (user["exec"]) {
      return makeError("kubeconfig: " + userWhere +
                       " uses an exec credential plugin, which podshaper does not run; "
                       "use a kubeconfig with a token or a client certificate");
    }
    if (user["auth-provider"]) {
      return makeError("kubeconfig: " + userWhere +
                       " uses an auth-provider, which podshaper does not support; "
                       "use a kubeconfig with a token or a client certificate");
    }
    if (user["username"] || user["password"]) {
      return makeError("kubeconfig: " + userWhere +
                       " uses basic auth (username/password), which podshaper does not support");
    }
  }
  return cfg;
}

std::string trimRight(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

std::string readOptionalTrimmed(const std::string& path) {
  auto r = readFileFromDisk(path);
  return r ? trimRight(*r) : std::string();
}

}  // namespace

Result<std::string> readFileFromDisk(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(inQuotes(path) + ": cannot read: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return makeError(inQuotes(path) + ": read failed");
  return ss.str();
}


Result<ClientConfig> parseKubeconfig(const std::string& yamlText, const std::string& baseDir,
                                     const std::string& contextOverride, const FileReader& readFile) {
  try {
    const YAML::Node root = YAML::Load(yamlText);
    return parseKubeconfigNode(root, baseDir, contextOverride, readFile);
  } catch (const YAML::Exception& e) {
    return makeError(std::string("kubeconfig: invalid YAML: ") + e.what());
  }
}

Result<ClientConfig> parseKubeconfig(const std::string& yamlText, const std::string& baseDir,
                                     const std::string& contextOverride) {
  return parseKubeconfig(yamlText, baseDir, contextOverride, readFileFromDisk);
}

Result<ClientConfig> loadKubeconfig(const std::string& path, const std::string& contextOverride) {
  auto text = readFileFromDisk(path);
  if (!text) return makeError("kubeconfig: " + text.error().message);
  const std::string baseDir = std::filesystem::path(path).parent_path().string();
  auto cfg = parseKubeconfig(*text, baseDir.empty() ? "." : baseDir, contextOverride);
  if (!cfg) return makeError(cfg.error().message + " (in " + path + ")");
  return cfg;
}

Result<ClientConfig> inClusterConfig(const std::string& host, const std::string& port,
                                     const std::string& serviceAccountDir) {
  if (host.empty() || port.empty()) {
    return makeError("in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  ClientConfig cfg;
  // An IPv6 service address needs brackets in a URL.
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  cfg.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  cfg.tokenFile = serviceAccountDir + "/token";
  auto token = readFileFromDisk(cfg.tokenFile);
  if (!token) return makeError("in-cluster config: token " + token.error().message);
  cfg.bearerToken = trimRight(*token);
  if (cfg.bearerToken.empty()) return makeError("in-cluster config: token file " + cfg.tokenFile + " is empty");
  auto ca = readFileFromDisk(serviceAccountDir + "/ca.crt");
  if (!ca) return makeError("in-cluster config: CA " + ca.error().message);
  cfg.caPem = *ca;
  cfg.defaultNamespace = readOptionalTrimmed(serviceAccountDir + "/namespace");
  return cfg;
}

Result<ClientConfig> inClusterConfig() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  return inClusterConfig(host ? host : "", port ? port : "", "/var/run/secrets/kubernetes.io/serviceaccount");
}

Result<ClientConfig> clientConfigFor(bool inCluster, const std::string& kubeconfigPath) {
  return inCluster ? inClusterConfig() : resolveClientConfig(kubeconfigPath);
}

Result<ClientConfig> resolveClientConfig(const std::string& kubeconfigPath) {
  if (!kubeconfigPath.empty()) return loadKubeconfig(kubeconfigPath);
  if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST"); host && *host) return inClusterConfig();
  if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
    std::string list(env);
    std::string first = list.substr(0, list.find(':'));
    if (!first.empty()) return loadKubeconfig(first);
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    const std::string path = std::string(home) + "/.kube/config";
    if (std::filesystem::exists(path)) return loadKubeconfig(path);
  }
  return makeError(
      "no Kubernetes client configuration: pass --kubeconfig, set KUBECONFIG, or run in a pod "
      "(KUBERNETES_SERVICE_HOST unset)");
}

}  // namespace podshaper::kube
