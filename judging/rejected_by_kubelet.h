#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "judging/events.h"

// Why a shaped pod the kubelet failed at admission died (docs/operator.md "Shaped pods
// explain themselves"). Pure: the operator's pod reconciler tells what this says as one
// RejectedByKubelet Event on the pod. A kubelet that restarts while a pod with devices of a
// device plugin runs re-admits the pod, and, before the plugin registered again, fails it
// (status.reason UnexpectedAdmissionError, or OutOfnvidia.com/gpu with capacity 0;
// kubernetes/kubernetes#133382): the kubelet's own Event does not say so.
namespace podshaper {

namespace reasons {
inline constexpr const char* kRejectedByKubelet = "RejectedByKubelet";
}  // namespace reasons

// The pod's status.reason when the kubelet failed it at admission: a resource manager's
// failure (a device plugin's devices not healthy yet), or "OutOf<resource>" when the node
// offered less of it than the pod asks (a device plugin not registered: capacity 0).
inline constexpr std::string_view kUnexpectedAdmissionError = "UnexpectedAdmissionError";
inline constexpr std::string_view kOutOfPrefix = "OutOf";
bool isAdmissionFailure(std::string_view reason);

// What the kubelet's message names.
enum class RejectionCause {
  kDevice,  // a device resource ("nvidia.com/gpu"): a device plugin not registered (again)
  kOther,
};
const char* toString(RejectionCause cause);  // "device", "other" (the metric's label)
inline constexpr std::array kRejectionCauses = {RejectionCause::kDevice, RejectionCause::kOther};

// The longest part of the kubelet's message an Event quotes, in bytes.
inline constexpr std::size_t kRejectionQuoteBytes = 300;

struct KubeletRejection {
  RejectionCause cause = RejectionCause::kOther;
  std::string key;  // told once per pod: its uid and the reason
  EventSpec event;  // on the pod
};

// A shaped pod (label podshaper.io/shaped=true) whose phase is Failed with a status.reason
// of isAdmissionFailure: the Event that explains it. Unset for any other pod.
std::optional<KubeletRejection> judgeKubeletRejection(const nlohmann::json& pod);

}  // namespace podshaper
