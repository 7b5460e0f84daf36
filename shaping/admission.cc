#include "shaping/admission.h"

#include <optional>
#include <string>

#include "base/base64.h"
#include "base/json_util.h"
#include "shaping/pod_shaper.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

// Deeper than any real pod; keeps the recursive walks (diff, dump) off the
// edge of the stack for hand-made bodies. The parser itself is iterative.
constexpr int kMaxDepth = 128;

// A string member, or nullopt when absent or of another type.
std::optional<std::string> text(const json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

bool isPodCreate(const json& request) {
  const json& kind = request.contains("kind") ? request["kind"] : json();
  return text(kind, "group") == "" && text(kind, "version") == "v1" && text(kind, "kind") == "Pod" &&
         text(request, "operation") == "CREATE" && text(request, "subResource").value_or("").empty();
}

}  // namespace

Result<AdmissionDecision> admit(std::string_view body, const Config& config, const ClusterView* cluster,
                                std::string_view shaperVersion, const ClaimLookup& claims) {
  if (nestedDeeperThan(body, kMaxDepth)) {
    return makeError("not an AdmissionReview: JSON nested deeper than " + std::to_string(kMaxDepth));
  }
  json in = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded()) return makeError("not an AdmissionReview: the body is not JSON");
  if (!in.is_object() || member(in, "kind") != "AdmissionReview") {
    return makeError("not an AdmissionReview: kind is not \"AdmissionReview\"");
  }
  if (member(in, "apiVersion") != "admission.k8s.io/v1") {
    return makeError("not an AdmissionReview: apiVersion must be admission.k8s.io/v1");
  }
  const json& request = member(in, "request");
  if (!request.is_object() || !request.contains("uid") || !request["uid"].is_string()) {
    return makeError("not an AdmissionReview: request.uid is missing");
  }

  AdmissionDecision decision;
  json response = {{"uid", request["uid"]}, {"allowed", true}};
  if (isPodCreate(request)) {
    const json& pod = member(request, "object");
    const json& meta = member(pod, "metadata");
    const std::string name = stringMember(meta, "name");
    decision.object = text(request, "namespace").value_or("") + "/" +
                      (name.empty() ? stringMember(meta, "generateName") + "*" : name);
    for (const json& ref : member(meta, "ownerReferences")) {
      if (member(ref, "controller") == true) decision.owner = stringMember(ref, "kind") + " " + stringMember(ref, "name");
    }
    AdmissionContext context;
    context.namespaceName = text(request, "namespace").value_or("");
    context.cluster = cluster;
    context.claims = claims;
    context.shaperVersion = std::string(shaperVersion);
    ShapeOutcome outcome = shapePod(pod, config, context);
    if (!outcome.allowed) {
      decision.allowed = false;
      decision.cause = outcome.cause;
      response["allowed"] = false;
      response["status"] = {{"code", 403}, {"reason", "Forbidden"}, {"message", outcome.message}};
    } else {
      json patch = json::diff(pod, outcome.pod);
      if (!patch.empty()) {
        decision.mutated = true;
        response["patchType"] = "JSONPatch";
        response["patch"] = base64Encode(patch.dump());
      }
    }
    if (!outcome.warnings.empty()) response["warnings"] = outcome.warnings;
  }
  decision.review = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"},
                     {"response", std::move(response)}};
  return decision;
}

}  // namespace podshaper
