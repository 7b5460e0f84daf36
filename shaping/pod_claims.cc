#include "shaping/pod_claims.h"

#include "base/checked.h"
#include "base/json_util.h"
#include "base/text.h"

namespace podshaper {

using nlohmann::json;

std::string_view kindName(ClaimKind kind) {
  return kind == ClaimKind::kTemplate ? "ResourceClaimTemplate" : "ResourceClaim";
}

Result<std::vector<ClaimRef>> claimRefs(const json& pod) {
  std::vector<ClaimRef> refs;
  const json& list = member(member(pod, "spec"), "resourceClaims");
  if (list.is_null()) return refs;
  if (!list.is_array()) return makeError("spec.resourceClaims: expected a list");
  for (const json& entry : list) {
    ClaimRef ref;
    ref.podClaim = stringMember(entry, "name");
    const std::string templateName = stringMember(entry, "resourceClaimTemplateName");
    const std::string claimName = stringMember(entry, "resourceClaimName");
    if (templateName.empty() == claimName.empty()) {
      return makeError("spec.resourceClaims[" + inQuotes(ref.podClaim) +
                       "]: set exactly one of resourceClaimTemplateName and resourceClaimName");
    }
    ref.kind = templateName.empty() ? ClaimKind::kClaim : ClaimKind::kTemplate;
    ref.name = templateName.empty() ? claimName : templateName;
    refs.push_back(std::move(ref));
  }
  return refs;
}

json claimSpecOf(const json& object) {
  const json& spec = member(object, "spec");
  if (hasText(member(object, "kind"), "ResourceClaimTemplate")) return member(spec, "spec");
  return spec;
}

ClaimLookup claimLookupOver(const std::vector<json>& objects) {
  std::map<std::string, json> specs;  // "kind/namespace/name"
  for (const json& o : objects) {
    const json& metadata = member(o, "metadata");
    specs[stringMember(o, "kind") + "/" + stringMember(metadata, "namespace") + "/" + stringMember(metadata, "name")] =
        claimSpecOf(o);
  }
  return [specs = std::move(specs)](std::string_view ns, const ClaimRef& ref) -> Result<std::optional<json>> {
    auto it = specs.find(std::string(kindName(ref.kind)) + "/" + std::string(ns) + "/" + ref.name);
    if (it == specs.end()) return std::optional<json>();
    return std::optional<json>(it->second);
  };
}

Result<PodClaimGpus> readPodClaimGpus(const json& pod, std::string_view ns, std::string_view deviceClass,
                                      const ClaimLookup& lookup, std::string_view channelClass) {
  PodClaimGpus out;
  auto refs = claimRefs(pod);
  if (!refs) return refs.error();
  if (refs->empty()) return out;
  if (!lookup) {
    out.read = false;
    out.warnings.push_back("the pod's resource claims were not read (the webhook does not watch the cluster): "
                           "GPUs asked through them are not counted");
    return out;
  }
  for (const ClaimRef& ref : *refs) {
    const std::string what = std::string(kindName(ref.kind)) + " " + inQuotes(ref.name) + " (spec.resourceClaims[" +
                             inQuotes(ref.podClaim) + "])";
    auto found = lookup(ns, ref);
    if (!found) return makeError(what + " could not be read: " + found.error().message);
    std::optional<json>& spec = *found;
    if (!spec) {
      return makeError(what + " was not found in namespace " + inQuotes(ns) +
                       ": create it before the pod, so that podshaper can count the GPUs it asks");
    }
    auto gpus = gpuRequests(*spec, deviceClass);
    if (!gpus) return makeError(what + ": " + gpus.error().message);
    if (!gpus->empty()) out.byPodClaim[ref.podClaim] = std::move(*gpus);
    if (!channelClass.empty() && requestsDeviceClass(*spec, channelClass)) out.channelClaims.insert(ref.podClaim);
  }
  return out;
}

Result<ContainerClaimGpus> containerClaimGpus(const json& container, const PodClaimGpus& claims,
                                              std::set<std::string>& taken) {
  ContainerClaimGpus out;
  const json& list = member(member(container, "resources"), "claims");
  if (!list.is_array()) return out;
  for (const json& use : list) {
    const std::string podClaim = stringMember(use, "name");
    auto claim = claims.byPodClaim.find(podClaim);
    if (claim == claims.byPodClaim.end()) continue;  // not a GPU claim
    // "request" or "request/subrequest"; unset: every request of the claim.
    const std::string named = stringMember(use, "request");
    const std::size_t slash = named.find('/');
    const std::string request = named.substr(0, slash);
    const std::string subrequest = slash == std::string::npos ? "" : named.substr(slash + 1);
    for (const GpuRequest& r : claim->second) {
      if (!request.empty() && r.name != request) continue;
      // The scheduler's first choice, the one counted: another subrequest gets no devices then.
      if (!subrequest.empty() && subrequest != r.chosen) continue;
      const std::string id = podClaim + "/" + r.name;
      if (!taken.insert(id).second) {
        out.shared.push_back("request " + inQuotes(r.name) + " of resource claim " + inQuotes(podClaim));
        continue;
      }
      out.counted = true;
      if (r.all) {
        out.all = true;
        continue;
      }
      auto sum = checkedAdd(out.count, r.count);
      if (!sum) return makeError("resource claim " + inQuotes(podClaim) + " takes the container's GPUs past 64 bits");
      out.count = *sum;
    }
  }
  return out;
}

}  // namespace podshaper
