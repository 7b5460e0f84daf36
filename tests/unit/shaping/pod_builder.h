#pragma once

// Scenario builders for shaping tests: TrainingPod().withGpus(8).annotate(...).

#include <string>

#include <nlohmann/json.hpp>

#include "shaping/cluster_view.h"

namespace podshaper::testing {

class TrainingPod {
 public:
  TrainingPod() {
    pod_ = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", "trainer-0"},
              {"namespace", "ml"},
              {"labels", {{"podshaper.io/inject", "true"}}},
              {"annotations",
               {{"podshaper.io/dataloader-workers", "8"},
                {"podshaper.io/prefetch-factor", "4"},
                {"podshaper.io/batch-shape", "32x3x224x224"},
                {"podshaper.io/batch-dtype", "float32"}}}}},
            {"spec",
             {{"containers",
               nlohmann::json::array({{{"name", "trainer"},
                                       {"image", "pytorch:2"},
                                       {"resources",
                                        {{"limits", {{"nvidia.com/gpu", "8"}, {"memory", "100Gi"}}},
                                         {"requests", {{"memory", "100Gi"}}}}}}})}}}};
  }
  TrainingPod& withGpus(int n) {
    pod_["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(n);
    return *this;
  }
  TrainingPod& annotate(const std::string& key, const std::string& value) {
    pod_["metadata"]["annotations"][key] = value;
    return *this;
  }
  TrainingPod& withoutAnnotation(const std::string& key) {
    pod_["metadata"]["annotations"].erase(key);
    return *this;
  }
  TrainingPod& withContainer(nlohmann::json container) {
    pod_["spec"]["containers"].push_back(std::move(container));
    return *this;
  }
  TrainingPod& at(const std::string& pointer, nlohmann::json value) {
    pod_[nlohmann::json::json_pointer(pointer)] = std::move(value);
    return *this;
  }
  TrainingPod& without(const std::string& pointer) {
    auto ptr = nlohmann::json::json_pointer(pointer);
    pod_[ptr.parent_pointer()].erase(ptr.back());
    return *this;
  }
  const nlohmann::json& json() const { return pod_; }
  operator const nlohmann::json&() const { return pod_; }  // NOLINT

 private:
  nlohmann::json pod_;
};

inline Node gpuNode(const std::string& name, int gpus, const std::string& p2p = "all", bool validated = true,
                    int64_t memory = 2LL << 40) {
  Node n;
  n.name = name;
  n.allocatableGpus = static_cast<uint64_t>(gpus);
  n.memoryBytes = memory;
  n.labels = {{"kubernetes.io/hostname", name}};
  if (validated) {
    n.labels.set("podshaper.io/topology-validated", "true");
    n.labels.set("podshaper.io/gpu-count", std::to_string(gpus));
    n.labels.set("podshaper.io/p2p", p2p);
    n.labels.set("podshaper.io/memlock", "unlimited");
  }
  return n;
}

}  // namespace podshaper::testing
