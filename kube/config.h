#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace podshaper::kube {

// Where the API server is and who we are to it. Certificates and keys are held
// as PEM text, never as paths, so that a Client needs no file system (except
// tokenFile, which is re-read because bound service-account tokens rotate).
struct ClientConfig {
  std::string server;  // https://host:port, optionally with a path prefix
  std::string caPem;   // empty: the system's trust store
  std::string clientCertPem, clientKeyPem;
  std::string bearerToken;  // used as is when tokenFile is empty; the first read of it otherwise
  std::string tokenFile;    // absolute path, re-read by the Client every minute
  bool insecureSkipTlsVerify = false;
  std::string defaultNamespace;  // the context's namespace, or the pod's own in-cluster
};

// Reads a whole file; an Error says which path and why.
using FileReader = std::function<Result<std::string>(const std::string& path)>;
Result<std::string> readFileFromDisk(const std::string& path);

// Resolves current-context (or contextOverride) -> context -> cluster + user.
// `*-data` fields are base64; plain file fields (certificate-authority,
// client-certificate, client-key) are read through readFile, relative paths
// against baseDir. tokenFile is resolved against baseDir but not read.
// No file system access except through readFile, so tests pass a map.
Result<ClientConfig> parseKubeconfig(const std::string& yamlText, const std::string& baseDir,
                                     const std::string& contextOverride, const FileReader& readFile);
Result<ClientConfig> parseKubeconfig(const std::string& yamlText, const std::string& baseDir,
                                     const std::string& contextOverride = "");

// Reads a kubeconfig file; relative paths inside it are relative to its directory.
Result<ClientConfig> loadKubeconfig(const std::string& path, const std::string& contextOverride = "");

// The pod's service account: KUBERNETES_SERVICE_HOST/PORT and
// /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace}.
Result<ClientConfig> inClusterConfig();
// Same, with the directory and environment given (for tests).
Result<ClientConfig> inClusterConfig(const std::string& host, const std::string& port,
                                     const std::string& serviceAccountDir);

// What a binary uses: an explicit kubeconfig path wins; otherwise in-cluster when
// KUBERNETES_SERVICE_HOST is set; otherwise $KUBECONFIG (its first entry) or
// ~/.kube/config.
Result<ClientConfig> resolveClientConfig(const std::string& kubeconfigPath = "");

// The flags every command that talks to the API server takes: --in-cluster forces the
// pod's service account, else as resolveClientConfig(--kubeconfig).
Result<ClientConfig> clientConfigFor(bool inCluster, const std::string& kubeconfigPath);


}  // namespace podshaper::kube
