#include "shaping/admission.h"

#include <string>

#include "base/base64.h"
#include "base/json_parse.h"
#include "base/json_util.h"
#include "base/json_write.h"
#include "shaping/pod_shaper.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

// Deeper than any real pod; keeps the recursive walks (diff, dump) off the
// edge of the stack for hand-made bodies.
constexpr int kMaxDepth = 128;

bool isPodCreate(const json& request) {
  const json& kind = member(request, "kind");
  const json& subResource = member(request, "subResource");
  return hasText(member(kind, "group"), "") && hasText(member(kind, "version"), "v1") &&
         hasText(member(kind, "kind"), "Pod") && hasText(member(request, "operation"), "CREATE") &&
         (!subResource.is_string() || hasText(subResource, ""));
}

}  // namespace

std::string AdmissionDecision::body() const {
  const json& response = member(review, "response");
  std::string out;
  if (!response.is_object() || !member(response, "patch").is_string()) {
    appendJson(out, review);
    return out;
  }
  // The keys in nlohmann's order (sorted), as dump() writes them; they are admit()'s own
  // (allowed, patch, patchType, status, uid, warnings): nothing in them to escape.
  // Room for the patch's base64 and the few fields around it, made once.
  out.reserve(member(response, "patch").get_ref<const std::string&>().size() + 1024);
  out = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{)";
  for (auto it = response.begin(); it != response.end(); ++it) {
    if (it != response.begin()) out += ',';
    out += '"';
    out += it.key();
    out += "\":";
    if (it.key() == "patch") {
      out += '"';
      out += it->get_ref<const std::string&>();  // base64: no character to escape
      out += '"';
    } else {
      appendJson(out, *it);
    }
  }
  out += "}}";
  return out;
}

Result<AdmissionDecision> admit(std::string_view body, const Config& config, const ClusterView* cluster,
                                std::string_view shaperVersion, const ClaimLookup& claims,
                                const ShmProfileLookup& shmProfiles, int64_t now) {
  AdmissionScratch scratch;
  return admit(scratch, body, config, cluster, shaperVersion, claims, shmProfiles, now);
}

Result<AdmissionDecision> admit(AdmissionScratch& scratch, std::string_view body, const Config& config,
                                const ClusterView* cluster, std::string_view shaperVersion, const ClaimLookup& claims,
                                const ShmProfileLookup& shmProfiles, int64_t now) {
  json& kept = scratch.review;
  // A large body's tree is freed when it is answered.
  struct FreeLarge {
    json& tree;
    std::size_t bytes;
    ~FreeLarge() {
      if (bytes > kSimdjsonReadsUpTo) freeTree(tree);  // read by nlohmann's parser
    }
  } freeLarge{kept, body.size()};
  auto parsed = scratch.reader.into(kept, body, kMaxDepth);
  if (!parsed) {
    return makeError(parsed.error().tooDeep
                         ? "not an AdmissionReview: JSON " + parsed.error().message
                         : "not an AdmissionReview: the body is not JSON");
  }
  json& in = kept;
  if (!in.is_object() || !hasText(member(in, "kind"), "AdmissionReview")) {
    return makeError("not an AdmissionReview: kind is not \"AdmissionReview\"");
  }
  if (!hasText(member(in, "apiVersion"), "admission.k8s.io/v1")) {
    return makeError("not an AdmissionReview: apiVersion must be admission.k8s.io/v1");
  }
  const json& request = member(in, "request");
  if (!request.is_object() || !request.contains("uid") || !request["uid"].is_string()) {
    return makeError("not an AdmissionReview: request.uid is missing");
  }

  AdmissionDecision decision;
  json response = jsonObject("uid", request["uid"], "allowed", true);
  if (isPodCreate(request)) {
    json& pod = in.at("request")["object"];  // shaped where it lies: the review is not read again
    const json& meta = member(pod, "metadata");
    const std::string name = stringMember(meta, "name");
    const std::string namespaceName = stringMember(request, "namespace");
    decision.object = namespaceName + "/" +
                      (name.empty() ? stringMember(meta, "generateName") + "*" : name);
    for (const json& ref : member(meta, "ownerReferences")) {
      if (member(ref, "controller") == true) decision.owner = stringMember(ref, "kind") + " " + stringMember(ref, "name");
    }
    AdmissionContext context;
    context.namespaceName = namespaceName;
    context.cluster = cluster;
    context.claims = claims;
    context.shmProfiles = shmProfiles;
    context.now = now;
    context.shaperVersion = std::string(shaperVersion);
    context.configHash = scratch.configHash.of(config);
    context.nodeRequirements = &scratch.nodeRequirements;
    ShapeOutcome outcome = shapePod(std::move(pod), config, context);
    if (!outcome.allowed) {
      decision.allowed = false;
      decision.cause = outcome.cause;
      response["allowed"] = false;
      response["status"] = jsonObject("code", 403, "reason", "Forbidden", "message", outcome.message);
    } else {
      if (!outcome.patch.empty()) {
        decision.mutated = true;
        response["patchType"] = "JSONPatch";
        response["patch"] = base64Encode(outcome.patch);
      }
    }
    if (!outcome.warnings.empty()) {
      json warnings(json::value_t::array);
      auto& items = *warnings.get_ptr<json::array_t*>();
      items.reserve(outcome.warnings.size());
      for (std::string& w : outcome.warnings) items.emplace_back(std::move(w));  // moved, not copied
      response["warnings"] = std::move(warnings);
    }
    if (outcome.allowed) pod = std::move(outcome.pod);  // kept for the next review (denied: still there)
  }
  decision.review = jsonObject("apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview", "response",
                              std::move(response));
  return decision;
}

}  // namespace podshaper
