#include "kube/store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace podshaper::kube {
namespace {

using nlohmann::json;

json object(const std::string& name, const std::string& rv, const std::string& ns = "") {
  json o = {{"kind", "Node"}, {"metadata", {{"name", name}, {"resourceVersion", rv}}}};
  if (!ns.empty()) o["metadata"]["namespace"] = ns;
  return o;
}

WatchEvent event(const std::string& type, json obj) { return WatchEvent{type, std::move(obj)}; }

TEST(ObjectKey, NamespacedAndClusterScoped) {
  EXPECT_EQ(*objectKey(object("gpu-1", "1")), "gpu-1");
  EXPECT_EQ(*objectKey(object("train-0", "1", "ml")), "ml/train-0");
  EXPECT_FALSE(objectKey(json::object()).ok());
  EXPECT_FALSE(objectKey(json{{"metadata", {{"name", ""}}}}).ok());
  EXPECT_FALSE(objectKey(json{{"metadata", {{"name", 3}}}}).ok());
  EXPECT_FALSE(objectKey(json::array()).ok());
}

TEST(StoreFromList, KeysItemsAndSkipsNameless) {
  json list = {{"kind", "PodList"},
               {"items", json::array({object("a", "1", "ns"), object("b", "2"), json{{"metadata", json::object()}}})}};
  ObjectStore store = storeFromList(list);
  ASSERT_EQ(store.size(), 2u);
  EXPECT_TRUE(store.count("ns/a"));
  EXPECT_TRUE(store.count("b"));
  EXPECT_TRUE(storeFromList(json::object()).empty());
}

// Each step applies one event to the store left by the steps before it.
struct Step {
  std::string description;
  WatchEvent event;
  bool wantChanged;
  std::vector<std::string> wantKeysAndVersions;  // "key@rv", in key order
  bool wantError = false;
};

std::vector<std::string> describe(const ObjectStore& store) {
  std::vector<std::string> out;
  for (const auto& [key, obj] : store) out.push_back(key + "@" + resourceVersionOf(obj));
  return out;
}

TEST(ApplyWatchEvent, Sequence) {
  const std::vector<Step> steps = {
      {"add a", event("ADDED", object("a", "10")), true, {"a@10"}},
      {"add b in a namespace", event("ADDED", object("b", "11", "ns")), true, {"a@10", "ns/b@11"}},
      {"modify a", event("MODIFIED", object("a", "12")), true, {"a@12", "ns/b@11"}},
      {"same resourceVersion again is no change", event("MODIFIED", object("a", "12")), false, {"a@12", "ns/b@11"}},
      {"ADDED for a known key replaces it", event("ADDED", object("a", "13")), true, {"a@13", "ns/b@11"}},
      {"MODIFIED for an unknown key inserts it", event("MODIFIED", object("c", "14")), true,
       {"a@13", "c@14", "ns/b@11"}},
      {"bookmark changes nothing", event("BOOKMARK", json{{"metadata", {{"resourceVersion", "20"}}}}), false,
       {"a@13", "c@14", "ns/b@11"}},
      {"error changes nothing", event("ERROR", json{{"kind", "Status"}, {"code", 410}}), false,
       {"a@13", "c@14", "ns/b@11"}},
      {"delete a", event("DELETED", object("a", "15")), true, {"c@14", "ns/b@11"}},
      {"delete unknown", event("DELETED", object("zz", "16")), false, {"c@14", "ns/b@11"}},
      {"delete namespaced", event("DELETED", object("b", "17", "ns")), true, {"c@14"}},
      {"nameless object is an error and changes nothing", event("ADDED", json{{"metadata", json::object()}}), false,
       {"c@14"}, true},
      {"unknown type is an error", event("RENAMED", object("c", "18")), false, {"c@14"}, true},
  };
  ObjectStore store;
  for (const auto& step : steps) {
    auto changed = applyWatchEvent(store, step.event);
    if (step.wantError) {
      EXPECT_FALSE(changed.ok()) << step.description;
    } else {
      ASSERT_TRUE(changed.ok()) << step.description << ": " << changed.error().message;
      EXPECT_EQ(*changed, step.wantChanged) << step.description;
    }
    EXPECT_EQ(describe(store), step.wantKeysAndVersions) << step.description;
  }
}

TEST(ApplyWatchEvent, ObjectWithoutResourceVersionAlwaysReplaces) {
  ObjectStore store;
  json o = {{"metadata", {{"name", "a"}}}, {"spec", 1}};
  ASSERT_TRUE(*applyWatchEvent(store, event("ADDED", o)));
  o["spec"] = 2;
  ASSERT_TRUE(*applyWatchEvent(store, event("MODIFIED", o)));
  EXPECT_EQ(store["a"]["spec"], 2);
}

}  // namespace
}  // namespace podshaper::kube

namespace podshaper::kube {
namespace {

TEST(ChangedKeys, AddedRemovedAndChanged) {
  ObjectStore before = {{"a", {{"v", 1}}}, {"b", {{"v", 1}}}, {"c", {{"v", 1}}}};
  ObjectStore after = {{"b", {{"v", 2}}}, {"c", {{"v", 1}}}, {"d", {{"v", 1}}}};
  EXPECT_EQ(changedKeys(before, after), (std::vector<std::string>{"a", "b", "d"}));
  EXPECT_TRUE(changedKeys(before, before).empty());
  EXPECT_EQ(changedKeys({}, before).size(), 3u);
  EXPECT_EQ(changedKeys(before, {}).size(), 3u);
}

}  // namespace
}  // namespace podshaper::kube

namespace podshaper::kube {
namespace {

TEST(StoreFromList, MovingGivesTheSameStore) {
  nlohmann::json list = {{"items", {{{"metadata", {{"name", "a"}, {"resourceVersion", "1"}}}},
                                    {{"metadata", {{"name", "b"}, {"namespace", "ns"}}}},
                                    {{"metadata", nlohmann::json::object()}}}}};
  ObjectStore copied = storeFromList(list);
  ObjectStore moved = storeFromList(std::move(list));
  EXPECT_EQ(copied, moved);
  EXPECT_EQ(moved.size(), 2u);
}

}  // namespace
}  // namespace podshaper::kube
