#include "operator/config.h"

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include <optional>

#include "base/quantity.h"
#include "base/timefmt.h"

namespace podshaper::op {
namespace {

Result<std::string> scalar(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) return makeError(key + ": expected a single value");
  return node.as<std::string>();
}

Result<std::chrono::seconds> duration(const YAML::Node& node, const std::string& key) {
  auto text = scalar(node, key);
  if (!text) return text.error();
  auto seconds = parseDurationSeconds(*text);
  if (!seconds || *seconds <= 0) return makeError(key + ": \"" + *text + "\": expected a duration such as 15s");
  return std::chrono::seconds(*seconds);
}

Result<bool> boolean(const YAML::Node& node, const std::string& key) {
  auto text = scalar(node, key);
  if (!text) return text.error();
  if (*text == "true") return true;
  if (*text == "false") return false;
  return makeError(key + ": \"" + *text + "\": expected true or false");
}

Result<std::vector<std::string>> strings(const YAML::Node& node, const std::string& key) {
  if (!node.IsSequence()) return makeError(key + ": expected a list");
  std::vector<std::string> out;
  for (const auto& item : node) {
    if (!item.IsScalar() || item.as<std::string>().empty()) return makeError(key + ": expected non-empty names");
    out.push_back(item.as<std::string>());
  }
  return out;
}

// An IP address as certificates print it ("0:0::1" is "::1"), so that the
// configured names compare equal to the ones read back from the certificate.
std::optional<std::string> canonicalIp(const std::string& text) {
  unsigned char bytes[16];
  char out[INET6_ADDRSTRLEN];
  for (int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, text.c_str(), bytes) == 1 && inet_ntop(family, bytes, out, sizeof out) != nullptr) {
      return std::string(out);
    }
  }
  return std::nullopt;
}

Result<void> parseWebhookCertificate(const YAML::Node& node, WebhookCertificateConfig& c) {
  if (!node.IsMap()) return makeError("webhookCertificate: expected a map");
  for (const auto& item : node) {
    const std::string sub = item.first.as<std::string>();
    const std::string at = "webhookCertificate." + sub;
    const YAML::Node& v = item.second;
    if (sub == "mode") {
      auto text = scalar(v, at);
      if (!text) return text.error();
      if (*text != "operator" && *text != "external") {
        return makeError(at + ": \"" + *text + "\": expected operator or external");
      }
      c.managed = *text == "operator";
    } else if (sub == "namespace" || sub == "secretName" || sub == "webhookConfiguration" || sub == "service") {
      auto text = scalar(v, at);
      if (!text) return text.error();
      (sub == "namespace" ? c.ns : sub == "secretName" ? c.secretName
                                 : sub == "webhookConfiguration" ? c.webhookConfiguration : c.service) = *text;
    } else if (sub == "dnsNames" || sub == "ipAddresses") {
      auto list = strings(v, at);
      if (!list) return list.error();
      if (sub == "ipAddresses") {
        for (auto& ip : *list) {
          auto canonical = canonicalIp(ip);
          if (!canonical) return makeError(at + ": \"" + ip + "\" is not an IP address");
          ip = *canonical;
        }
      }
      (sub == "dnsNames" ? c.dnsNames : c.ipAddresses) = *list;
    } else if (sub == "caValidity" || sub == "validity" || sub == "renewBefore" || sub == "checkInterval") {
      auto d = duration(v, at);
      if (!d) return d.error();
      (sub == "caValidity" ? c.caValidity : sub == "validity" ? c.validity
                                         : sub == "renewBefore" ? c.renewBefore : c.checkInterval) = *d;
    } else {
      return makeError(at + ": unknown setting");
    }
  }
  if (c.renewBefore >= c.validity) {
    return makeError("webhookCertificate.renewBefore must be shorter than validity, or it renews forever");
  }
  if (c.validity >= c.caValidity) return makeError("webhookCertificate.validity must be shorter than caValidity");
  if (c.managed && c.service.empty() && c.dnsNames.empty() && c.ipAddresses.empty()) {
    return makeError("webhookCertificate: a service, dnsNames or ipAddresses are needed for the certificate's names");
  }
  return {};
}

// A whole number from `low` to `high`.
Result<uint64_t> countIn(const YAML::Node& node, const std::string& key, uint64_t low, uint64_t high) {
  auto text = scalar(node, key);
  if (!text) return text.error();
  auto n = parseCount(*text);
  if (!n || *n < low || *n > high) {
    return makeError(key + ": \"" + *text + "\": expected " + std::to_string(low) + ".." + std::to_string(high));
  }
  return *n;
}

Result<void> parseShmProfiles(const YAML::Node& node, ProfileSettings& s) {
  if (!node.IsMap()) return makeError("shmProfiles: expected a map");
  for (const auto& item : node) {
    const std::string sub = item.first.as<std::string>();
    const std::string at = "shmProfiles." + sub;
    if (sub == "runsKept" || sub == "headroomPercent") {
      auto n = sub == "runsKept" ? countIn(item.second, at, 1, 100) : countIn(item.second, at, 0, 1000);
      if (!n) return n.error();
      (sub == "runsKept" ? s.runsKept : s.headroomPercent) = *n;
    } else if (sub == "maxAge") {
      auto d = duration(item.second, at);
      if (!d) return d.error();
      if (*d < std::chrono::hours(1)) {
        return makeError(at + ": \"" + item.second.as<std::string>() +
                         "\": expected at least 1h (a run is kept this long after it ended)");
      }
      s.maxAgeSeconds = d->count();
    } else {
      return makeError(at + ": unknown setting");
    }
  }
  return {};
}

}  // namespace

std::vector<std::string> WebhookCertificateConfig::sans() const {
  std::vector<std::string> out;
  if (!service.empty()) {
    for (const std::string& suffix : {std::string(), "." + ns, "." + ns + ".svc", "." + ns + ".svc.cluster.local"}) {
      out.push_back(service + suffix);
    }
  }
  out.insert(out.end(), dnsNames.begin(), dnsNames.end());
  out.insert(out.end(), ipAddresses.begin(), ipAddresses.end());
  return out;
}

Result<OperatorConfig> parseOperatorConfig(const std::string& yaml) {
  OperatorConfig c;
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return makeError("not YAML: " + std::string(e.what()));
  }
  if (root.IsNull()) return c;
  if (!root.IsMap()) return makeError("expected a map of settings");
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    const YAML::Node& v = item.second;
    if (key == "listen" || key == "tlsCertFile" || key == "tlsKeyFile" || key == "eventNamespace") {
      auto text = scalar(v, key);
      if (!text) return text.error();
      (key == "listen" ? c.listen : key == "tlsCertFile" ? c.tlsCertFile : key == "tlsKeyFile" ? c.tlsKeyFile
                                                                                                : c.eventNamespace) = *text;
    } else if (key == "workers") {
      auto n = countIn(v, key, 1, 64);
      if (!n) return n.error();
      c.workers = static_cast<int>(*n);
    } else if (key == "leaderElection") {
      if (!v.IsMap()) return makeError("leaderElection: expected a map");
      for (const auto& le : v) {
        const std::string sub = le.first.as<std::string>();
        const std::string at = "leaderElection." + sub;
        if (sub == "enabled") {
          auto b = boolean(le.second, at);
          if (!b) return b.error();
          c.leaderElection = *b;
        } else if (sub == "namespace" || sub == "name") {
          auto text = scalar(le.second, at);
          if (!text) return text.error();
          (sub == "namespace" ? c.leaseNamespace : c.leaseName) = *text;
        } else if (sub == "leaseDuration" || sub == "renewDeadline" || sub == "retryPeriod") {
          auto d = duration(le.second, at);
          if (!d) return d.error();
          (sub == "leaseDuration" ? c.leaseDuration : sub == "renewDeadline" ? c.renewDeadline : c.retryPeriod) = *d;
        } else {
          return makeError(at + ": unknown setting");
        }
      }
    } else if (key == "pendingGrace") {
      auto d = duration(v, key);
      if (!d) return d.error();
      c.pendingGrace = *d;
    } else if (key == "webhookCertificate") {
      if (auto ok = parseWebhookCertificate(v, c.webhookCertificate); !ok) return ok.error();
    } else if (key == "shmProfiles") {
      if (auto ok = parseShmProfiles(v, c.shmProfiles); !ok) return ok.error();
    } else {
      return makeError(key + ": unknown setting");
    }
  }
  if (c.eventNamespace.empty()) return makeError("eventNamespace: must not be empty");
  if (c.tlsCertFile.empty() != c.tlsKeyFile.empty()) return makeError("tlsCertFile and tlsKeyFile go together");
  return c;
}

}  // namespace podshaper::op
