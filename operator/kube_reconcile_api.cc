#include "operator/kube_reconcile_api.h"

#include "api/names.h"
#include "kube/protocol.h"

namespace podshaper::op {

using nlohmann::json;

kube::ApiResult<json> KubeReconcileApi::patchReportStatus(const std::string& name, const json& body) {
  return client_.patchStatus(kube::resourcePath(names::kGroupVersion, names::kReportResource, "", name), body,
                             kube::PatchType::Merge);
}

kube::ApiResult<json> KubeReconcileApi::patchNode(const std::string& name, const json& patch) {
  return client_.patch(kube::resourcePath("v1", "nodes", "", name), patch, kube::PatchType::Merge);
}

kube::ApiResult<json> KubeReconcileApi::patchNodeStatus(const std::string& name, const json& patch) {
  return client_.patchStatus(kube::resourcePath("v1", "nodes", "", name), patch, kube::PatchType::StrategicMerge);
}

kube::ApiResult<json> KubeReconcileApi::createEvent(const std::string& ns, const json& event) {
  return client_.create(kube::resourcePath("v1", "events", ns), event);
}

kube::ApiResult<json> KubeReconcileApi::patchPolicyStatus(const std::string& name, const json& patch) {
  return client_.patchStatus(kube::resourcePath(names::kGroupVersion, names::kPolicyResource, "", name), patch,
                             kube::PatchType::Merge);
}

kube::ApiResult<std::string> KubeReconcileApi::readLog(const std::string& ns, const std::string& pod,
                                                       const std::string& container, bool previous) {
  // Enough lines for every worker's traceback after the one that matters, and a bound on
  // what one read costs (limitBytes counts from the first of those lines: few enough lines
  // that it seldom cuts the end, where the cause is).
  return client_.getText(kube::withQuery(kube::resourcePath("v1", "pods", ns, pod) + "/log",
                                         {{"container", container},
                                          {"previous", previous ? "true" : ""},
                                          {"tailLines", "500"},
                                          {"limitBytes", std::to_string(1 << 20)}}));
}

kube::ApiResult<json> KubeReconcileApi::getShmUsage(const std::string& ns, const std::string& name) {
  return client_.get(kube::resourcePath(names::kGroupVersion, names::kShmUsageResource, ns, name));
}

namespace {

std::string shmProfilePath(const std::string& ns, const std::string& name = "") {
  return kube::resourcePath(names::kGroupVersion, names::kShmProfileResource, ns, name);
}

}  // namespace

kube::ApiResult<json> KubeReconcileApi::getShmProfile(const std::string& ns, const std::string& name) {
  return client_.get(shmProfilePath(ns, name));
}

kube::ApiResult<json> KubeReconcileApi::createShmProfile(const std::string& ns, const json& object) {
  return client_.create(shmProfilePath(ns), object);
}

kube::ApiResult<json> KubeReconcileApi::putShmProfileStatus(const std::string& ns, const std::string& name,
                                                            const json& object) {
  return client_.replaceStatus(shmProfilePath(ns, name), object);
}

kube::ApiResult<json> KubeReconcileApi::deleteShmProfile(const std::string& ns, const std::string& name,
                                                         const std::string& resourceVersion) {
  return client_.remove(shmProfilePath(ns, name), {{"preconditions", {{"resourceVersion", resourceVersion}}}});
}

}  // namespace podshaper::op
