#include "webhook/check.h"

#include <gtest/gtest.h>

namespace podshaper::webhook {
namespace {

using nlohmann::json;

TEST(Check, ThePodOptsInWithOneGpuAndNothingToSize) {
  const json pod = checkPod("team-a");
  EXPECT_EQ(pod["metadata"]["namespace"], "team-a");
  EXPECT_EQ(pod["metadata"]["labels"]["podshaper.io/inject"], "true");
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(pod["metadata"]["annotations"]["podshaper.io/dataloader-workers"], "0");
}

TEST(Check, AShapedPodSaysTheWebhookAnswered) {
  json shaped = checkPod("default");
  shaped["metadata"]["annotations"]["podshaper.io/shaped-by"] = "podshaper-webhook";
  shaped["metadata"]["annotations"]["podshaper.io/shm-size"] = "64Mi";
  auto said = judgeCheck(shaped);
  ASSERT_TRUE(said) << said.error().message;
  EXPECT_EQ(*said, "the API server called the webhook: the pod was shaped by podshaper-webhook (/dev/shm 64Mi)");
}

TEST(Check, ADenialByTheWebhookIsAnAnswer) {
  auto said = judgeCheck(kube::makeApiError(
      400, "BadRequest",
      "POST /api/v1/namespaces/default/pods: 400 BadRequest: admission webhook \"pods.podshaper.io\" denied the "
      "request: podshaper: no node has 1 GPU"));
  ASSERT_TRUE(said) << said.error().message;
  EXPECT_NE(said->find("it denied the pod"), std::string::npos);
}

TEST(Check, AnUnshapedPodOrAFailedCallIsNot) {
  auto unshaped = judgeCheck(checkPod("default"));
  ASSERT_FALSE(unshaped);
  EXPECT_NE(unshaped.error().message.find("did not call the webhook"), std::string::npos);
  auto down = judgeCheck(kube::makeApiError(
      500, "InternalError",
      "Internal error occurred: failed calling webhook \"pods.podshaper.io\": failed to call webhook: Post "
      "\"https://podshaper-webhook.podshaper-system.svc:443/mutate?timeout=10s\": connection refused"));
  ASSERT_FALSE(down);
  EXPECT_NE(down.error().message.find("did not get an answer from the webhook: Internal error occurred: failed "
                                      "calling webhook"),
            std::string::npos);
}

}  // namespace
}  // namespace podshaper::webhook
