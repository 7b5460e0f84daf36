#include "operator/webhook_certs.h"

#include <chrono>
#include <set>

#include "base/base64.h"
#include "cli/logging.h"
#include "kube/protocol.h"
#include "pki/certs.h"

namespace podshaper::op {
namespace {
const cli::Logger& kLog = cli::logger("webhook-certificate");

using nlohmann::json;

long long nowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The PEM blocks of a bundle, in order.
std::vector<std::string> splitPem(const std::string& bundle) {
  static const std::string kBegin = "-----BEGIN CERTIFICATE-----", kEnd = "-----END CERTIFICATE-----";
  std::vector<std::string> out;
  for (std::size_t at = bundle.find(kBegin); at != std::string::npos; at = bundle.find(kBegin, at)) {
    const std::size_t end = bundle.find(kEnd, at);
    if (end == std::string::npos) break;
    out.push_back(bundle.substr(at, end + kEnd.size() - at) + "\n");
    at = end;
  }
  return out;
}

std::string secretField(const json& secret, const char* key) {
  if (!secret.is_object() || !secret.contains("data") || !secret["data"].is_object()) return "";
  const json& data = secret["data"];
  if (!data.contains(key) || !data[key].is_string()) return "";
  auto decoded = base64Decode(data[key].get<std::string>());
  return decoded ? *decoded : "";
}

// Why the serving certificate must be issued again, or "" when it is good.
std::string leafProblem(const std::string& cert, const std::string& key, const std::string& caPem,
                        const std::vector<std::string>& sans, long long now, long long renewBefore) {
  if (cert.empty() || key.empty()) return "no serving certificate yet";
  auto info = pki::inspectCertificate(cert);
  if (!info) return "the serving certificate does not parse (" + info.error().message + ")";
  auto signedOk = pki::signedBy(cert, caPem);
  if (!signedOk || !*signedOk) return "the serving certificate is not signed by the current CA";
  auto keyOk = pki::keyMatches(cert, key);
  if (!keyOk || !*keyOk) return "the serving key does not match its certificate";
  std::set<std::string> want(sans.begin(), sans.end());
  std::set<std::string> have(info->dnsNames.begin(), info->dnsNames.end());
  have.insert(info->ipAddresses.begin(), info->ipAddresses.end());
  if (want != have) return "its names differ from the configured ones";
  if (info->notAfter - now <= renewBefore) return "it expires within renewBefore";
  return "";
}

// The CA: the first certificate of ca.crt, with ca.key; a new one when it is
// missing, broken or in the last tenth of its life. `bundle` gets the new one first.
// True when a new CA was made.
Result<bool> ensureCa(std::string& caCert, std::string& caKey, std::vector<std::string>& bundle, long long now,
                      std::chrono::seconds validity) {
  std::string why;
  if (caCert.empty() || caKey.empty()) {
    why = "no CA yet";
  } else if (auto info = pki::inspectCertificate(caCert); !info || !info->isCA) {
    why = "ca.crt is not a CA certificate";
  } else if (auto match = pki::keyMatches(caCert, caKey); !match || !*match) {
    why = "ca.key does not match ca.crt";
  } else if (info->notAfter - now <= (info->notAfter - info->notBefore) / 10) {
    why = "the CA is in the last tenth of its life";
  }
  if (why.empty()) return false;
  auto ca = pki::makeCertificateAuthority("podshaper-webhook-ca", validity.count());
  if (!ca) return makeError("making a CA: " + ca.error().message);
  kLog.info("a new CA ({})", why);
  caCert = ca->certPem;
  caKey = ca->keyPem;
  bundle.insert(bundle.begin(), caCert);
  return true;
}

// The bundle: the current CA and every earlier one still valid (certificates
// they signed may still be served until the kubelet refreshes the files).
std::string caBundleOf(const std::vector<std::string>& bundle, long long now) {
  std::string caBundle;
  for (std::size_t i = 0; i < bundle.size(); ++i) {
    auto info = pki::inspectCertificate(bundle[i]);
    if (i == 0 || (info && info->isCA && info->notAfter > now)) caBundle += bundle[i];
  }
  return caBundle;
}

// The MutatingWebhookConfiguration with every webhook's caBundle set; null when all already are.
json withCaBundle(const json& mwc, const std::string& encoded) {
  bool differs = false;
  json updated = mwc;
  if (updated.contains("webhooks") && updated["webhooks"].is_array()) {
    for (auto& w : updated["webhooks"]) {
      if (!w.is_object()) continue;
      if (!w.contains("clientConfig") || !w["clientConfig"].is_object()) w["clientConfig"] = json::object();
      if (w["clientConfig"].value("caBundle", json("")) != encoded) {
        w["clientConfig"]["caBundle"] = encoded;
        differs = true;
      }
    }
  }
  return differs ? updated : json(nullptr);
}

bool renewAsked(const json& secret) {
  return secret.is_object() && secret.contains("metadata") &&
         secret["metadata"].value("annotations", json::object()).contains(std::string(kRenewAnnotation));
}

}  // namespace

WebhookCertificates::WebhookCertificates(const kube::Client& client, WebhookCertificateConfig config,
                                         metrics::Registry& metrics, std::function<bool()> mayWrite)
    : client_(client),
      config_(std::move(config)),
      mayWrite_(std::move(mayWrite)),
      expiry_(metrics.gauge("podshaper_operator_webhook_certificate_expiry_timestamp_seconds",
                            "When the webhook's serving certificate in its Secret expires.")),
      issued_(metrics.counter("podshaper_operator_webhook_certificates_issued_total",
                              "Serving certificates issued for the webhook.")),
      caIssued_(metrics.counter("podshaper_operator_webhook_cas_issued_total", "CAs made for the webhook.")),
      bundleWrites_(metrics.counter("podshaper_operator_webhook_cabundle_writes_total",
                                    "Writes of the MutatingWebhookConfiguration's caBundle.")),
      errors_(metrics.counter("podshaper_operator_webhook_certificate_errors_total",
                              "Certificate checks that failed (see the log).")) {}

WebhookCertificates::~WebhookCertificates() { stop(); }

void WebhookCertificates::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { loop(); });
}

void WebhookCertificates::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WebhookCertificates::trigger() {
  {
    std::lock_guard lock(mu_);
    triggered_ = true;
  }
  cv_.notify_all();
}

void WebhookCertificates::loop() {
  auto delay = config_.checkInterval;
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, delay, [this] { return stop_ || triggered_; });
      if (stop_) return;
      triggered_ = false;
    }
    delay = config_.checkInterval;
    if (!mayWrite_()) continue;
    if (auto done = reconcile(); !done) {
      errors_.inc();
      kLog.warn("{}", done.error().message);
      delay = std::min<std::chrono::seconds>(delay, std::chrono::seconds(5));
    }
  }
}

Result<bool> WebhookCertificates::reconcile() {
  const long long now = nowSeconds();
  const std::string secretPath = kube::resourcePath("v1", "secrets", config_.ns, config_.secretName);
  auto got = client_.get(secretPath);
  json secret = nullptr;
  if (got) {
    secret = *got;
  } else if (!got.error().isNotFound()) {
    return makeError("reading Secret " + config_.ns + "/" + config_.secretName + ": " + got.error().message);
  }

  std::string caKey = secretField(secret, "ca.key");
  std::vector<std::string> bundle = splitPem(secretField(secret, "ca.crt"));
  std::string caCert = bundle.empty() ? "" : bundle.front();
  auto newCa = ensureCa(caCert, caKey, bundle, now, config_.caValidity);
  if (!newCa) return newCa.error();
  if (*newCa) caIssued_.inc();
  bool changed = *newCa;
  const std::string caBundle = caBundleOf(bundle, now);

  // The caBundle first: the API server must trust the new CA before anything it signed is served.
  auto bundleWrite = writeCaBundle(caBundle);
  if (!bundleWrite) return bundleWrite.error();
  if (*bundleWrite == BundleWrite::kNotLeader) return false;

  // The serving certificate.
  std::string cert = secretField(secret, "tls.crt"), key = secretField(secret, "tls.key");
  std::string leafWhy = renewAsked(secret) ? "asked by the " + std::string(kRenewAnnotation) + " annotation"
                                           : leafProblem(cert, key, caCert, config_.sans(), now,
                                                         config_.renewBefore.count());
  if (!leafWhy.empty()) {
    auto leaf = pki::issueServingCertificate({caCert, caKey}, config_.sans(), config_.validity.count());
    if (!leaf) return makeError("issuing the serving certificate: " + leaf.error().message);
    kLog.info("a new serving certificate ({})", leafWhy);
    cert = leaf->certPem;
    key = leaf->keyPem;
    issued_.inc();
    changed = true;
  }
  if (auto info = pki::inspectCertificate(cert)) expiry_.set(static_cast<double>(info->notAfter));

  const bool caFieldDiffers = secretField(secret, "ca.crt") != caBundle;
  if (!changed && !caFieldDiffers) return *bundleWrite == BundleWrite::kWritten;
  if (!mayWrite_()) return false;
  auto written = writeSecret(secret, {{"tls.crt", cert}, {"tls.key", key}, {"ca.crt", caBundle}, {"ca.key", caKey}});
  if (!written) return written.error();
  return true;
}

Result<WebhookCertificates::BundleWrite> WebhookCertificates::writeCaBundle(const std::string& caBundle) {
  const std::string mwcPath = kube::resourcePath("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations",
                                                 "", config_.webhookConfiguration);
  auto mwc = client_.get(mwcPath);
  if (!mwc) {
    return makeError("reading MutatingWebhookConfiguration " + config_.webhookConfiguration + ": " +
                     mwc.error().message);
  }
  const json updated = withCaBundle(*mwc, base64Encode(caBundle));
  if (updated.is_null()) return BundleWrite::kSame;
  if (!mayWrite_()) return BundleWrite::kNotLeader;
  auto written = client_.replace(mwcPath, updated);
  if (!written) return makeError("writing the caBundle: " + written.error().message);
  bundleWrites_.inc();
  const std::size_t cas = splitPem(caBundle).size();
  kLog.info("caBundle of MutatingWebhookConfiguration {} set ({} CA{})", config_.webhookConfiguration, cas,
            cas == 1 ? "" : "s");
  return BundleWrite::kWritten;
}

Result<void> WebhookCertificates::writeSecret(const json& secret, const std::map<std::string, std::string>& data) {
  json body = secret.is_object() ? secret
                                 : json{{"apiVersion", "v1"},
                                        {"kind", "Secret"},
                                        {"metadata", {{"name", config_.secretName}, {"namespace", config_.ns}}},
                                        {"type", "kubernetes.io/tls"}};
  body["data"] = json::object();
  for (const auto& [k, v] : data) body["data"][k] = base64Encode(v);
  if (body["metadata"].contains("annotations") && body["metadata"]["annotations"].is_object()) {
    body["metadata"]["annotations"].erase(std::string(kRenewAnnotation));
  }
  auto written = secret.is_object()
                     ? client_.replace(kube::resourcePath("v1", "secrets", config_.ns, config_.secretName), body)
                     : client_.create(kube::resourcePath("v1", "secrets", config_.ns), body);
  if (!written) {
    return makeError("writing Secret " + config_.ns + "/" + config_.secretName + ": " + written.error().message);
  }
  kLog.info("Secret {}/{} written", config_.ns, config_.secretName);
  return {};
}

}  // namespace podshaper::op
