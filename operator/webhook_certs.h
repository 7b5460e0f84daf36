#pragma once

// The webhook's TLS, made by the operator (webhookCertificate.mode: operator):
// a CA and a serving certificate in Secret <namespace>/<secretName> (type
// kubernetes.io/tls: tls.crt, tls.key, ca.crt, ca.key), the CA injected as the
// caBundle of every webhook of the MutatingWebhookConfiguration, the serving
// certificate renewed renewBefore its expiry (or when the Secret is annotated
// podshaper.io/renew), the CA at 90% of its life. The webhook pods mount only
// tls.crt and tls.key and reload them when the kubelet updates the files.
//
// Order matters for a rotation that the API server must survive: the caBundle
// gains a new CA before any certificate signed by it is served, and keeps the
// previous CA while certificates it signed may still be served.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "api/names.h"
#include "base/result.h"
#include "kube/client.h"
#include "metrics/metrics.h"
#include "operator/config.h"

namespace podshaper::op {

// The annotation that asks for a new serving certificate now (any value).
inline constexpr std::string_view kRenewAnnotation = names::kRenewAnnotation;

class WebhookCertificates {
 public:
  WebhookCertificates(const kube::Client& client, WebhookCertificateConfig config, metrics::Registry& metrics,
                      std::function<bool()> mayWrite);
  ~WebhookCertificates();
  WebhookCertificates(const WebhookCertificates&) = delete;
  WebhookCertificates& operator=(const WebhookCertificates&) = delete;

  void start();
  void stop();
  // Check now (on becoming the leader).
  void trigger();

  // One check: the Secret and the caBundle made right; true when it wrote either.
  // Public for tests.
  Result<bool> reconcile();

 private:
  enum class BundleWrite { kSame, kWritten, kNotLeader };
  void loop();
  // The MutatingWebhookConfiguration's caBundle, when it differs and this replica leads.
  Result<BundleWrite> writeCaBundle(const std::string& caBundle);
  // The Secret with `data` (base64-encoded here), created or replaced; the renew annotation removed.
  Result<void> writeSecret(const nlohmann::json& secret, const std::map<std::string, std::string>& data);

  const kube::Client& client_;
  const WebhookCertificateConfig config_;
  const std::function<bool()> mayWrite_;
  metrics::Gauge& expiry_;
  metrics::Counter &issued_, &caIssued_, &bundleWrites_, &errors_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, triggered_ = false;
  std::thread thread_;
};

}  // namespace podshaper::op
