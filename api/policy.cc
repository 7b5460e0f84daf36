#include "api/policy.h"

#include <algorithm>

#include "base/timefmt.h"

namespace podshaper {
namespace {

using nlohmann::json;

const std::vector<std::pair<LinkClass, const char*>> kLinks = {
    {LinkClass::NVLink, "NVLink"}, {LinkClass::PIX, "PIX"},   {LinkClass::PXB, "PXB"},
    {LinkClass::PHB, "PHB"},       {LinkClass::NODE, "NODE"}, {LinkClass::SYS, "SYS"}};

class PolicyReader {
 public:
  explicit PolicyReader(std::string name) : name_(std::move(name)) {}

  Error error(const std::string& field, const std::string& what) const {
    return makeError("TopologyPolicy \"" + name_ + "\": " + field + ": " + what);
  }

  Result<LabelSelector> selector(const json& j, const std::string& field) const {
    LabelSelector s;
    if (j.is_null()) return s;
    if (!j.is_object()) return error(field, "expected an object");
    if (j.contains("matchLabels") && !j["matchLabels"].is_null()) {
      if (!j["matchLabels"].is_object()) return error(field + ".matchLabels", "expected a map of strings");
      for (const auto& [k, v] : j["matchLabels"].items()) {
        if (!v.is_string()) return error(field + ".matchLabels." + k, "expected a string");
        s.matchLabels[k] = v.get<std::string>();
      }
    }
    if (j.contains("matchExpressions") && !j["matchExpressions"].is_null()) {
      if (!j["matchExpressions"].is_array()) return error(field + ".matchExpressions", "expected a list");
      for (std::size_t i = 0; i < j["matchExpressions"].size(); ++i) {
        const json& e = j["matchExpressions"][i];
        const std::string at = field + ".matchExpressions[" + std::to_string(i) + "]";
        if (!e.is_object() || !e.contains("key") || !e["key"].is_string()) return error(at, "needs a key");
        NodeRequirement ex;
        ex.key = e["key"].get<std::string>();
        const std::string op = e.value("operator", json("")).is_string() ? e.value("operator", std::string()) : "";
        const auto parsed = parseMatchOp(op);
        if (!parsed || *parsed == MatchOp::kGt || *parsed == MatchOp::kLt) {
          return error(at + ".operator", "\"" + op + "\": expected In, NotIn, Exists or DoesNotExist");
        }
        ex.op = *parsed;
        if (e.contains("values") && !e["values"].is_null()) {
          if (!e["values"].is_array()) return error(at + ".values", "expected a list of strings");
          for (const auto& v : e["values"]) {
            if (!v.is_string()) return error(at + ".values", "expected a list of strings");
            ex.values.push_back(v.get<std::string>());
          }
        }
        const bool listed = ex.op == MatchOp::kIn || ex.op == MatchOp::kNotIn;
        if (listed && ex.values.empty()) return error(at + ".values", op + " needs values");
        if (!listed && !ex.values.empty()) return error(at + ".values", op + " takes no values");
        s.matchExpressions.push_back(std::move(ex));
      }
    }
    return s;
  }

  Result<Requirements> requirements(const json& j) const {
    Requirements r;
    const std::string base = "spec.requirements.";
    if (j.is_null()) return r;
    if (!j.is_object()) return error("spec.requirements", "expected an object");
    for (const auto& [key, v] : j.items()) {
      const std::string field = base + key;
      if (v.is_null()) continue;
      if (key == "minGPUs") {
        if (!v.is_number_integer() || v.get<long long>() < 0) return error(field, "expected a whole number ≥ 0");
        r.minGPUs = v.get<long long>();
      } else if (key == "requireP2PAllPairs" || key == "requireMemlockUnlimited" || key == "requireNVLinkDomain") {
        if (!v.is_boolean()) return error(field, "expected true or false");
        (key == "requireP2PAllPairs"        ? r.requireP2PAllPairs
         : key == "requireMemlockUnlimited" ? r.requireMemlockUnlimited
                                            : r.requireNVLinkDomain) = v.get<bool>();
      } else if (key == "minLink") {
        auto link = v.is_string() ? parseLinkClass(v.get<std::string>()) : std::nullopt;
        if (!link || (v.get<std::string>().rfind("NV", 0) == 0 && v.get<std::string>() != "NVLink")) {
          return error(field, v.dump() + ": expected one of NVLink, PIX, PXB, PHB, NODE, SYS");
        }
        r.minLink = link;
      } else if (key == "minBandwidthGBps") {
        if (!v.is_number() || v.get<double>() < 0) return error(field, "expected a number ≥ 0");
        r.minBandwidthGBps = v.get<double>();
      } else if (key == "maxReportAge") {
        auto seconds = v.is_string() ? parseDurationSeconds(v.get<std::string>()) : std::nullopt;
        if (!seconds || *seconds <= 0) return error(field, v.dump() + ": expected a duration such as 10m or 1h");
        r.maxReportAgeSeconds = seconds;
      } else {
        return error(field, "unknown requirement");
      }
    }
    return r;
  }

 private:
  std::string name_;
};

}  // namespace

bool LabelSelector::matches(const std::map<std::string, std::string>& labels) const {
  return matchesBy([&labels](const std::string& key) -> const std::string* {
    auto it = labels.find(key);
    return it == labels.end() ? nullptr : &it->second;
  });
}

std::optional<LinkClass> parseLinkClass(const std::string& text) {
  if (text.size() > 2 && text.rfind("NV", 0) == 0 &&
      std::all_of(text.begin() + 2, text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return LinkClass::NVLink;
  }
  for (const auto& [link, name] : kLinks) {
    if (text == name) return link;
  }
  return std::nullopt;
}

const char* toString(LinkClass link) {
  for (const auto& [l, name] : kLinks) {
    if (l == link) return name;
  }
  return "?";
}

Result<Policy> policyFromJson(const json& object) {
  if (!object.is_object()) return makeError("TopologyPolicy: expected an object");
  Policy p;
  if (object.contains("metadata") && object["metadata"].is_object() && object["metadata"].contains("name") &&
      object["metadata"]["name"].is_string()) {
    p.name = object["metadata"]["name"].get<std::string>();
  }
  PolicyReader reader(p.name);
  if (p.name.empty()) return reader.error("metadata.name", "missing");
  const json spec = object.contains("spec") ? object["spec"] : json::object();
  if (!spec.is_object()) return reader.error("spec", "expected an object");
  auto selector = reader.selector(spec.value("nodeSelector", json(nullptr)), "spec.nodeSelector");
  if (!selector) return selector.error();
  p.nodeSelector = std::move(*selector);
  auto reqs = reader.requirements(spec.value("requirements", json(nullptr)));
  if (!reqs) return reqs.error();
  p.requirements = std::move(*reqs);
  if (spec.contains("taintOnFailure") && !spec["taintOnFailure"].is_null()) {
    const json& t = spec["taintOnFailure"];
    std::string effect = t.is_object() && t.contains("effect") && t["effect"].is_string()
                             ? t["effect"].get<std::string>()
                             : "NoSchedule";
    if (!t.is_object() || (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute")) {
      return reader.error("spec.taintOnFailure.effect", "expected NoSchedule, PreferNoSchedule or NoExecute");
    }
    p.requirements.taintEffect = effect;
  }
  return p;
}

EffectiveRequirements effectiveRequirements(const std::vector<Policy>& policies,
                                            const std::map<std::string, std::string>& nodeLabels) {
  // NoExecute is the strongest effect, PreferNoSchedule the weakest.
  auto effectRank = [](const std::string& e) { return e == "NoExecute" ? 3 : e == "NoSchedule" ? 2 : 1; };
  EffectiveRequirements out;
  Requirements& r = out.requirements;
  for (const auto& p : policies) {
    if (!p.nodeSelector.matches(nodeLabels)) continue;
    out.policies.push_back(p.name);
    const Requirements& q = p.requirements;
    if (q.minGPUs) r.minGPUs = std::max(r.minGPUs.value_or(0), *q.minGPUs);
    r.requireP2PAllPairs = r.requireP2PAllPairs || q.requireP2PAllPairs;
    if (q.minLink && (!r.minLink || *q.minLink < *r.minLink)) r.minLink = q.minLink;
    if (q.minBandwidthGBps) r.minBandwidthGBps = std::max(r.minBandwidthGBps.value_or(0), *q.minBandwidthGBps);
    r.requireMemlockUnlimited = r.requireMemlockUnlimited || q.requireMemlockUnlimited;
    r.requireNVLinkDomain = r.requireNVLinkDomain || q.requireNVLinkDomain;
    if (q.maxReportAgeSeconds && (!r.maxReportAgeSeconds || *q.maxReportAgeSeconds < *r.maxReportAgeSeconds)) {
      r.maxReportAgeSeconds = q.maxReportAgeSeconds;
    }
    if (q.taintEffect && (!r.taintEffect || effectRank(*q.taintEffect) > effectRank(*r.taintEffect))) {
      r.taintEffect = q.taintEffect;
    }
  }
  std::sort(out.policies.begin(), out.policies.end());
  return out;
}

}  // namespace podshaper
