#include "shaping/admission.h"

#include <gtest/gtest.h>

#include <set>

#include "base/base64.h"
#include "pod_builder.h"

namespace podshaper {
namespace {

using nlohmann::json;

json review(const json& object, const std::string& operation = "CREATE", const std::string& kind = "Pod") {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", kind}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"namespace", "ml"},
            {"operation", operation},
            {"object", object}}}};
}

// Decodes response.patch the way the API server does.
json decodePatch(const json& response) {
  auto raw = base64Decode(response["patch"].get<std::string>());
  EXPECT_TRUE(raw.ok());
  return json::parse(raw.ok() ? *raw : "[]");
}

json applyPatch(const json& pod, const json& response) { return pod.patch(decodePatch(response)); }

TEST(Admission, PodCreateIsPatchedAndThePatchReproducesTheShapedPod) {
  testing::TrainingPod pod;
  auto d = admit(review(pod).dump(), Config{}, nullptr, "podshaper-webhook/test");
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_TRUE(d->allowed);
  EXPECT_TRUE(d->mutated);
  const json& r = d->review["response"];
  EXPECT_EQ(d->review["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(d->review["kind"], "AdmissionReview");
  EXPECT_EQ(r["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(r["patchType"], "JSONPatch");
  json shaped = applyPatch(pod, r);
  EXPECT_EQ(shaped["metadata"]["annotations"]["podshaper.io/shm-size"], "8231Mi");
  EXPECT_TRUE(r["warnings"].is_array());
  EXPECT_EQ(d->body(), d->review.dump());  // the bytes the webhook answers
}

TEST(Admission, AnnotationKeysAreJsonPointerEscaped) {
  testing::TrainingPod pod;
  auto d = admit(review(pod).dump(), Config{}, nullptr, "v");
  ASSERT_TRUE(d.ok());
  std::set<std::string> paths;
  for (const auto& op : decodePatch(d->review["response"])) paths.insert(op["path"]);
  EXPECT_TRUE(paths.contains("/metadata/annotations/podshaper.io~1shaped-by"));
  EXPECT_TRUE(paths.contains("/metadata/annotations/ulimits.noderesource.dev~1container.trainer"));
  EXPECT_TRUE(paths.contains("/metadata/labels/podshaper.io~1placement"));
  EXPECT_TRUE(paths.contains("/spec/volumes"));
}

TEST(Admission, ShapedPodGivesNoPatch) {
  testing::TrainingPod pod;
  auto first = admit(review(pod).dump(), Config{}, nullptr, "v");
  ASSERT_TRUE(first.ok());
  json shaped = applyPatch(pod, first->review["response"]);
  auto second = admit(review(shaped).dump(), Config{}, nullptr, "v");
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->allowed);
  EXPECT_FALSE(second->mutated);
  EXPECT_FALSE(second->review["response"].contains("patch"));
}

TEST(Admission, DenialCarriesTheMessage) {
  auto d = admit(review(testing::TrainingPod().annotate("podshaper.io/batch-dtype", "float8")).dump(), Config{},
                 nullptr, "v");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  const json& r = d->review["response"];
  EXPECT_EQ(r["allowed"], false);
  EXPECT_EQ(r["status"]["code"], 403);
  EXPECT_NE(r["status"]["message"].get<std::string>().find("unknown dtype \"float8\""), std::string::npos);
  EXPECT_FALSE(r.contains("patch"));
  EXPECT_EQ(d->body(), d->review.dump());
}

TEST(Admission, OtherOperationsAndKindsAreAllowedUnchanged) {
  for (const auto& [op, kind] : std::vector<std::pair<std::string, std::string>>{
           {"UPDATE", "Pod"}, {"DELETE", "Pod"}, {"CREATE", "Deployment"}, {"CONNECT", "Pod"}}) {
    auto d = admit(review(testing::TrainingPod(), op, kind).dump(), Config{}, nullptr, "v");
    ASSERT_TRUE(d.ok()) << op << " " << kind;
    EXPECT_TRUE(d->allowed);
    EXPECT_FALSE(d->mutated);
    EXPECT_EQ(d->review["response"], json({{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"}, {"allowed", true}}));
    EXPECT_EQ(d->body(), d->review.dump());
  }
}

TEST(Admission, NotAnAdmissionReviewIsAnError) {
  struct Case {
    std::string body;
    std::string error;
  };
  json noUid = review(testing::TrainingPod());
  noUid["request"].erase("uid");
  json v1beta1 = review(testing::TrainingPod());
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  for (const auto& c : std::vector<Case>{
           {"", "the body is not JSON"},
           {"{\"kind\":", "the body is not JSON"},
           {"[]", "kind is not \"AdmissionReview\""},
           {R"({"kind":"Pod","apiVersion":"v1"})", "kind is not \"AdmissionReview\""},
           {v1beta1.dump(), "apiVersion must be admission.k8s.io/v1"},
           {noUid.dump(), "request.uid is missing"},
           {R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"})", "request.uid is missing"}}) {
    auto d = admit(c.body, Config{}, nullptr, "v");
    ASSERT_FALSE(d.ok()) << c.body;
    EXPECT_NE(d.error().message.find(c.error), std::string::npos) << d.error().message;
  }
}


}  // namespace
}  // namespace podshaper
