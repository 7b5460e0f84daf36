#include "webhook/check.h"

#include <iostream>

#include "api/names.h"
#include "base/json_util.h"
#include "cli/flags.h"
#include "kube/client.h"
#include "kube/config.h"

namespace podshaper::webhook {

using nlohmann::json;

json checkPod(const std::string& ns) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"generateName", "podshaper-check-"},
                {"namespace", ns},
                {"labels", {{names::kInjectLabel, "true"}}},
                {"annotations",
                 {{names::kWorkers, "0"}, {names::kNcclCommunicators, "0"}}}}},
              {"spec",
               {{"restartPolicy", "Never"},
                {"containers",
                 {{{"name", "check"},
                   {"image", "podshaper.invalid/never-run"},
                   {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
  return pod;
}

Result<std::string> judgeCheck(const kube::ApiResult<json>& created) {
  if (created) {
    const json& annotations = member(member(*created, "metadata"), "annotations");
    const std::string by = stringMember(annotations, names::kShapedBy);
    if (by.empty()) {
      return makeError("the API server created the pod unshaped: it did not call the webhook (is the "
                       "MutatingWebhookConfiguration podshaper there, with failurePolicy Ignore hiding a failure, "
                       "or does its namespaceSelector leave this namespace out?)");
    }
    return "the API server called the webhook: the pod was shaped by " + by + " (/dev/shm " +
           stringMember(annotations, names::kShmSize) + ")";
  }
  const std::string& m = created.error().message;
  if (m.find("podshaper.io\" denied the request") != std::string::npos) {  // webhook pods.podshaper.io
    return "the API server called the webhook: it denied the pod (" + m + ")";
  }
  return makeError("the API server did not get an answer from the webhook: " + m);
}

int runCheck(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2, {"kubeconfig", "namespace"}, {"in-cluster"});
  if (!flags) {
    std::cerr << "podshaper-webhook check: " << flags.error().message << "\n";
    return 2;
  }
  auto config = kube::clientConfigFor(flags->has("in-cluster"), flags->get("kubeconfig", ""));
  if (!config) {
    std::cerr << "podshaper-webhook check: " << config.error().message << "\n";
    return 2;
  }
  const std::string ns = flags->get("namespace", "default");
  kube::Client client(*config, kube::ClientOptions{.userAgent = "podshaper-webhook/" PODSHAPER_VERSION});
  auto said = judgeCheck(client.create(kube::resourcePath("v1", "pods", ns) + "?dryRun=All", checkPod(ns)));
  if (!said) {
    std::cerr << "podshaper-webhook check: " << said.error().message << "\n";
    return 1;
  }
  std::cout << "podshaper-webhook check: " << *said << "\n";
  return 0;
}

}  // namespace podshaper::webhook
