#pragma once

// ReconcileApi through the Kubernetes API (kube::Client).

#include <string>

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "operator/reconciler.h"

namespace podshaper::op {

class KubeReconcileApi : public ReconcileApi {
 public:
  explicit KubeReconcileApi(const kube::Client& client) : client_(client) {}
  kube::ApiResult<nlohmann::json> patchReportStatus(const std::string& name, const nlohmann::json& body) override;
  kube::ApiResult<nlohmann::json> patchNode(const std::string& name, const nlohmann::json& patch) override;
  kube::ApiResult<nlohmann::json> patchNodeStatus(const std::string& name, const nlohmann::json& patch) override;
  kube::ApiResult<nlohmann::json> createEvent(const std::string& ns, const nlohmann::json& event) override;
  kube::ApiResult<nlohmann::json> patchPolicyStatus(const std::string& name, const nlohmann::json& patch) override;
  kube::ApiResult<std::string> readLog(const std::string& ns, const std::string& pod, const std::string& container,
                                       bool previous) override;
  kube::ApiResult<nlohmann::json> getShmUsage(const std::string& ns, const std::string& name) override;
  kube::ApiResult<nlohmann::json> getShmProfile(const std::string& ns, const std::string& name) override;
  kube::ApiResult<nlohmann::json> createShmProfile(const std::string& ns, const nlohmann::json& object) override;
  kube::ApiResult<nlohmann::json> putShmProfileStatus(const std::string& ns, const std::string& name,
                                                      const nlohmann::json& object) override;
  kube::ApiResult<nlohmann::json> deleteShmProfile(const std::string& ns, const std::string& name,
                                                   const std::string& resourceVersion) override;

 private:
  const kube::Client& client_;
};

}  // namespace podshaper::op
