#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_edit.h"
#include "base/result.h"

namespace podshaper {

// What podshaper reads of a pod is bounded, so that an admission costs about what
// parsing its body costs whatever the user wrote (bench/admission_cost), and what it
// writes stays inside the limits the API server checks after the mutating webhooks
// (docs/webhook.md "Limits").

// The API server's limit on a pod's annotations: the sum of every key's and value's bytes.
inline constexpr std::size_t kApiAnnotationsLimit = 256 * 1024;
// The NRI ulimit annotations podshaper reads (YAML) and extends, each and together: a
// list of every rlimit is under 1 KiB, and YAML costs 30 times what JSON does to read.
inline constexpr std::size_t kMaxUlimitAnnotationBytes = 4 * 1024;
// A podshaper.io/ annotation podshaper reads (a count, a quantity, a shape, a dtype).
inline constexpr std::size_t kMaxInputAnnotationBytes = 256;
// A container's name: a DNS label, as the API server checks after the webhooks.
inline constexpr std::size_t kMaxContainerName = 63;
// GPU containers in one pod: each holds at least one GPU of one node.
inline constexpr std::size_t kMaxGpuContainers = 64;
// spec.affinity.nodeAffinity's required nodeSelectorTerms podshaper adds its
// requirements to (copying each term once per memlock alternative): the terms, the
// requirements (matchExpressions and matchFields) of each, and the bytes of their keys and
// values in all.
inline constexpr std::size_t kMaxSelectorTerms = 64;
inline constexpr std::size_t kMaxTermRequirements = 64;
inline constexpr std::size_t kMaxSelectorTermsBytes = 16 * 1024;
// podshaper.io/batch-shape: dimensions of one batch tensor.
inline constexpr std::size_t kMaxBatchDimensions = 16;

// The bytes of an object's annotations as the API server counts them (keys and values).
std::size_t annotationsBytes(const nlohmann::json& object);
// The same of an object's metadata.annotations itself.
std::size_t bytesOfAnnotations(const nlohmann::json& annotations);

// "256 KiB (262144 B)"
std::string limitWords(std::size_t bytes);

// Checked before podshaper reads a pod: its annotations within the API server's limit
// (it would refuse the pod anyway), the NRI ulimit annotations and podshaper's own within
// what podshaper reads, container names that are names (unique, at most 63 bytes: the API
// server refuses others). An error names the annotation or field, the size and the limit.
Result<void> checkPodSize(const nlohmann::json& pod);

// Checked before podshaper rewrites a GPU pod's required node affinity.
Result<void> checkNodeAffinitySize(const nlohmann::json& pod);

// After shaping: the shaped pod's annotations within the API server's limit. Over it,
// podshaper.io/warnings is left out first (the warnings still reach the create
// response); still over, an error that says what podshaper added (the annotations its
// patch adds or replaces) and what the pod had (`beforeBytes`: bytesOfAnnotations of its
// metadata.annotations as submitted).
Result<void> fitAnnotations(std::size_t beforeBytes, JsonEdit& shaped);

}  // namespace podshaper
