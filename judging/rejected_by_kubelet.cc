#include "judging/rejected_by_kubelet.h"

#include <cctype>

#include "api/names.h"
#include "base/json_util.h"
#include "base/text.h"
#include "judging/shm_exhausted.h"

namespace podshaper {

using nlohmann::json;

const char* toString(RejectionCause cause) {
  switch (cause) {
    case RejectionCause::kDevice: return "device";
    case RejectionCause::kOther: return "other";
  }
  return "other";
}

namespace {

// The kubelet's words without its "Pod was rejected: " prefix, on one line, without
// terminal control sequences, at most kRejectionQuoteBytes.
std::string kubeletWords(std::string message) {
  constexpr std::string_view kPrefix = "Pod was rejected: ";
  if (message.starts_with(kPrefix)) message.erase(0, kPrefix.size());
  for (char& ch : message) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
  }
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return cutUtf8(std::move(message), kRejectionQuoteBytes);
}

bool resourceChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

// The first extended resource the message names ("nvidia.com/gpu", "amd.com/gpu"): a
// domain with a dot, a slash, a name. Empty: none.
std::string deviceResource(const std::string& message) {
  for (std::size_t slash = message.find('/'); slash != std::string::npos; slash = message.find('/', slash + 1)) {
    std::size_t begin = slash;
    while (begin > 0 && resourceChar(message[begin - 1])) --begin;
    std::size_t end = slash + 1;
    while (end < message.size() && resourceChar(message[end])) ++end;
    while (end > slash + 1 && message[end - 1] == '.') --end;  // a sentence's full stop
    const std::string domain = message.substr(begin, slash - begin);
    if (end == slash + 1 || domain.find('.') == std::string::npos || domain.front() == '.' ||
        domain.back() == '.' || !std::isalpha(static_cast<unsigned char>(message[slash + 1]))) {
      continue;
    }
    return message.substr(begin, end - begin);
  }
  return "";
}

// Who makes a new pod: the pod's controller, or none.
std::string retryWords(const json& pod) {
  if (auto owner = controllerOf(pod)) {
    return "Its controller (" + owner->kind + " " + owner->name +
           ") makes a new pod where its retry policy allows (a Job's backoffLimit >= 1).";
  }
  return "A bare pod is not retried: run training under a Job (backoffLimit >= 1), JobSet or a training operator, "
         "which makes a new pod.";
}

}  // namespace

bool isAdmissionFailure(std::string_view reason) {
  return reason == kUnexpectedAdmissionError || (reason.size() > kOutOfPrefix.size() && reason.starts_with(kOutOfPrefix));
}

std::optional<KubeletRejection> judgeKubeletRejection(const json& pod) {
  const json& meta = member(pod, "metadata");
  const json& status = member(pod, "status");
  if (stringMember(member(meta, "labels"), names::kShapedLabel) != "true" ||
      stringMember(status, "phase") != "Failed" || !isAdmissionFailure(stringMember(status, "reason"))) {
    return std::nullopt;
  }
  const std::string node = stringMember(member(pod, "spec"), "nodeName");
  const std::string words = kubeletWords(stringMember(status, "message"));
  // OutOf<resource> names a device resource the node offers less of than asked: only
  // none at all (capacity 0) is a device plugin not registered yet.
  const bool outOf = stringMember(status, "reason") != kUnexpectedAdmissionError;
  const std::string resource =
      outOf && words.find("capacity: 0") == std::string::npos ? std::string() : deviceResource(words);
  KubeletRejection r;
  r.cause = resource.empty() ? RejectionCause::kOther : RejectionCause::kDevice;
  r.key = stringMember(meta, "uid") + "/" + reasons::kRejectedByKubelet;
  std::string m = "The kubelet of " + (node.empty() ? std::string("its node") : "node " + node) +
                  (resource.empty() ? " refused this pod at admission" : " failed this pod at admission");
  m += words.empty() ? std::string(" (it gave no message).") : ": \"" + words + "\".";
  if (resource.empty()) {
    m += " It is not run (again) on that node. " + retryWords(pod);
  } else {
    m += " It names the device resource " + resource +
         ", which the kubelet did not have registered then: a kubelet that restarted re-admits the pods it runs before "
         "the device plugin registered again, and fails them (a Kubernetes bug, kubernetes/kubernetes#133382); a pod "
         "that was running had its containers stopped and its /dev/shm is gone. " +
         retryWords(pod) + " Restart kubelets only after draining GPU nodes.";
  }
  r.event = EventSpec{"Warning", reasons::kRejectedByKubelet, std::move(m)};
  return r;
}

}  // namespace podshaper
