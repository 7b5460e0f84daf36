#include "core/admission.h"

#include "core/base64.h"
#include "core/pod_shaper.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

bool isPodCreate(const json& request) {
  const json& kind = request.value("kind", json::object());
  return kind.is_object() && kind.value("group", std::string("?")).empty() &&
         kind.value("version", std::string()) == "v1" && kind.value("kind", std::string()) == "Pod" &&
         request.value("operation", std::string()) == "CREATE" &&
         request.value("subResource", std::string()).empty();
}

}  // namespace

Result<AdmissionDecision> admit(std::string_view body, const Config& config,
                                const ClusterView* cluster, std::string_view shaperVersion) {
  json in = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded()) return makeError("not an AdmissionReview: the body is not JSON");
  if (!in.is_object() || in.value("kind", json()) != "AdmissionReview") {
    return makeError("not an AdmissionReview: kind is not \"AdmissionReview\"");
  }
  if (in.value("apiVersion", json()) != "admission.k8s.io/v1") {
    return makeError("not an AdmissionReview: apiVersion must be admission.k8s.io/v1");
  }
  const json& request = in.value("request", json());
  if (!request.is_object() || !request.contains("uid") || !request["uid"].is_string()) {
    return makeError("not an AdmissionReview: request.uid is missing");
  }

  AdmissionDecision decision;
  json response = {{"uid", request["uid"]}, {"allowed", true}};
  if (isPodCreate(request)) {
    const json& pod = request.value("object", json());
    AdmissionContext context;
    context.namespaceName = request.value("namespace", std::string());
    context.cluster = cluster;
    context.shaperVersion = std::string(shaperVersion);
    ShapeOutcome outcome = shapePod(pod, config, context);
    if (!outcome.allowed) {
      decision.allowed = false;
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
