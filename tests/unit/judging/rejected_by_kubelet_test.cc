#include "judging/rejected_by_kubelet.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

using json = nlohmann::json;

const std::string kNoHealthy =
    "Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate unhealthy devices "
    "nvidia.com/gpu, which is unexpected";

// A shaped pod on node real-h200x4-0 that the kubelet failed with `reason` and `message`.
json failedPod(const std::string& reason, const std::string& message, bool shaped = true, bool owned = false) {
  json pod = {{"metadata", {{"name", "train-0"}, {"namespace", "ml"}, {"uid", "pod-uid"}}},
              {"spec", {{"nodeName", "real-h200x4-0"}}},
              {"status", {{"phase", "Failed"}, {"reason", reason}, {"message", message}}}};
  if (shaped) pod["metadata"]["labels"]["podshaper.io/shaped"] = "true";
  if (owned) {
    pod["metadata"]["ownerReferences"] = json::array(
        {{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", "train"}, {"uid", "job-uid"}, {"controller", true}}});
  }
  return pod;
}

TEST(KubeletRejection, ADeviceResourceNamedIsTheKubeletRestartBug) {
  const auto r = judgeKubeletRejection(failedPod("UnexpectedAdmissionError", kNoHealthy));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->cause, RejectionCause::kDevice);
  EXPECT_EQ(r->key, "pod-uid/RejectedByKubelet");
  EXPECT_EQ(r->event.type, "Warning");
  EXPECT_EQ(r->event.reason, "RejectedByKubelet");
  EXPECT_EQ(r->event.message,
            "The kubelet of node real-h200x4-0 failed this pod at admission: \"Allocate failed due to no healthy "
            "devices present; cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected\". It names the "
            "device resource nvidia.com/gpu, which the kubelet did not have registered then: a kubelet that restarted "
            "re-admits the pods it runs before the device plugin registered again, and fails them (a Kubernetes bug, "
            "kubernetes/kubernetes#133382); a pod that was running had its containers stopped and its /dev/shm is "
            "gone. A bare pod is not retried: run training under a Job (backoffLimit "
            ">= 1), JobSet or a training operator, which makes a new pod. Restart kubelets only after draining GPU "
            "nodes.");
}

// Seen on the real node: a kubelet started again re-admits its running pod before the device
// plugin registered, and finds no nvidia.com/gpu at all.
TEST(KubeletRejection, OutOfADeviceResourceWithNoneOfferedIsTheSameBug) {
  const auto r = judgeKubeletRejection(failedPod(
      "OutOfnvidia.com/gpu",
      "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 0, capacity: 0"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->cause, RejectionCause::kDevice);
  EXPECT_NE(r->event.message.find("failed this pod at admission: \"Node didn't have enough resource: nvidia.com/gpu, "
                                  "requested: 1, used: 0, capacity: 0\". It names the device resource nvidia.com/gpu, "
                                  "which the kubelet did not have registered then: a kubelet that restarted re-admits"),
            std::string::npos)
      << r->event.message;
  // Some offered, too few: not a plugin missing, just quoted.
  const auto some = judgeKubeletRejection(failedPod(
      "OutOfnvidia.com/gpu",
      "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 4, used: 2, capacity: 4"));
  ASSERT_TRUE(some);
  EXPECT_EQ(some->cause, RejectionCause::kOther);
  EXPECT_EQ(some->event.message.find("133382"), std::string::npos);
}

TEST(KubeletRejection, APodOfAControllerSaysItsControllerRetries) {
  const auto r = judgeKubeletRejection(failedPod(
      "UnexpectedAdmissionError",
      "Pod was rejected: Allocate failed due to requested number of devices unavailable for amd.com/gpu. "
      "Requested: 8, Available: 0, which is unexpected",
      true, true));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->cause, RejectionCause::kDevice);
  EXPECT_NE(r->event.message.find("It names the device resource amd.com/gpu, which the kubelet did not have registered then"), std::string::npos);
  EXPECT_NE(r->event.message.find("Its controller (Job train) makes a new pod where its retry policy allows"),
            std::string::npos);
  EXPECT_EQ(r->event.message.find("A bare pod"), std::string::npos);
}

TEST(KubeletRejection, AMessageNamingNoDeviceIsQuotedAndTheRetrySaid) {
  const auto r =
      judgeKubeletRejection(failedPod("UnexpectedAdmissionError", "Pod was rejected: some admit handler failed"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->cause, RejectionCause::kOther);
  EXPECT_EQ(r->event.message,
            "The kubelet of node real-h200x4-0 refused this pod at admission: \"some admit handler failed\". It is not "
            "run (again) on that node. A bare pod is not retried: run training "
            "under a Job (backoffLimit >= 1), JobSet or a training operator, which makes a new pod.");
  // A path is not a device resource.
  const auto path = judgeKubeletRejection(failedPod("UnexpectedAdmissionError", "cannot open /var/lib/kubelet/x.sock"));
  ASSERT_TRUE(path);
  EXPECT_EQ(path->cause, RejectionCause::kOther);
  const auto none = judgeKubeletRejection(failedPod("UnexpectedAdmissionError", ""));
  ASSERT_TRUE(none);
  EXPECT_NE(none->event.message.find("refused this pod at admission (it gave no message)."), std::string::npos);
}

TEST(KubeletRejection, OnlyAShapedPodFailedWithAnAdmissionReason) {
  EXPECT_FALSE(judgeKubeletRejection(failedPod("UnexpectedAdmissionError", kNoHealthy, /*shaped=*/false)));
  EXPECT_FALSE(judgeKubeletRejection(failedPod("Evicted", kNoHealthy)));
  EXPECT_FALSE(judgeKubeletRejection(failedPod("OutOf", kNoHealthy)));
  EXPECT_FALSE(judgeKubeletRejection(failedPod("NodeAffinity", kNoHealthy)));
  EXPECT_FALSE(judgeKubeletRejection(failedPod("unexpectedadmissionerror", kNoHealthy)));
  EXPECT_FALSE(judgeKubeletRejection(failedPod("UnexpectedAdmissionError ", kNoHealthy)));
  json running = failedPod("UnexpectedAdmissionError", kNoHealthy);
  running["status"]["phase"] = "Running";
  EXPECT_FALSE(judgeKubeletRejection(running));
  json labelled = failedPod("UnexpectedAdmissionError", kNoHealthy, false);
  labelled["metadata"]["labels"]["podshaper.io/shaped"] = "false";
  EXPECT_FALSE(judgeKubeletRejection(labelled));
  EXPECT_FALSE(judgeKubeletRejection(json::object()));
  EXPECT_FALSE(judgeKubeletRejection(json::array()));
}

TEST(KubeletRejection, TheQuoteIsBoundedAndOnOneLine) {
  const std::string longMessage = "Pod was rejected: line one\n\x1b[31mred\x1b[0m " + std::string(5000, 'x');
  const auto r = judgeKubeletRejection(failedPod("UnexpectedAdmissionError", longMessage));
  ASSERT_TRUE(r);
  const std::string& m = r->event.message;
  const std::size_t open = m.find('"'), close = m.find('"', open + 1);
  ASSERT_NE(close, std::string::npos);
  const std::string quoted = m.substr(open + 1, close - open - 1);
  EXPECT_EQ(quoted.size(), kRejectionQuoteBytes);
  EXPECT_TRUE(quoted.starts_with("line one  [31mred [0m xxx"));
  EXPECT_TRUE(quoted.ends_with("..."));
  for (char ch : m) EXPECT_GE(static_cast<unsigned char>(ch), 0x20);
  EXPECT_LT(m.size(), 1024u);  // whole on kubectl's one line
}

}  // namespace
}  // namespace podshaper
