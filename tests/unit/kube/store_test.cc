#include "kube/store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace podshaper::kube {
namespace {

using nlohmann::json;

// Each version's content differs (spec.version), as a real change's does.
json object(const std::string& name, const std::string& rv, const std::string& ns = "") {
  json o = {{"kind", "Node"}, {"metadata", {{"name", name}, {"resourceVersion", rv}}}, {"spec", {{"version", rv}}}};
  if (!ns.empty()) o["metadata"]["namespace"] = ns;
  return o;
}

WatchEvent event(const std::string& type, json obj) { return WatchEvent{type, std::move(obj)}; }

json sameButRv(json o, const std::string& rv) {
  o["metadata"]["resourceVersion"] = rv;
  return o;
}

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
      {"only the resourceVersion moved: stored, no change", event("MODIFIED", sameButRv(object("a", "12"), "19")), false,
       {"a@19", "ns/b@11"}},
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

TEST(SameButVersion, OnlyTheResourceVersionMayDiffer) {
  const json a = {{"metadata", {{"name", "a"}, {"resourceVersion", "1"}, {"labels", {{"x", "1"}}}}}, {"spec", 1}};
  EXPECT_TRUE(sameButVersion(a, a));
  json b = a;
  b["metadata"]["resourceVersion"] = "2";
  EXPECT_TRUE(sameButVersion(a, b));
  b["metadata"].erase("resourceVersion");
  EXPECT_TRUE(sameButVersion(a, b));  // a version missing on one side only
  EXPECT_TRUE(sameButVersion(b, a));
  b["metadata"]["labels"]["x"] = "2";
  EXPECT_FALSE(sameButVersion(a, b));
  json c = a;
  c["spec"] = 2;
  EXPECT_FALSE(sameButVersion(a, c));
  c = a;
  c["status"] = json::object();
  EXPECT_FALSE(sameButVersion(a, c));
  c = a;
  c["metadata"]["uid"] = "u";
  EXPECT_FALSE(sameButVersion(a, c));
  EXPECT_FALSE(sameButVersion(a, json::array()));
  EXPECT_TRUE(sameButVersion(json(3), json(3)));
}

TEST(ChangedKeys, AddedRemovedAndChanged) {
  ObjectStore before = {{"a", {{"v", 1}}}, {"b", {{"v", 1}}}, {"c", {{"v", 1}}}};
  ObjectStore after = {{"b", {{"v", 2}}}, {"c", {{"v", 1}}}, {"d", {{"v", 1}}}};
  EXPECT_EQ(changedKeys(before, after), (std::vector<std::string>{"a", "b", "d"}));
  EXPECT_TRUE(changedKeys(before, before).empty());
  ObjectStore moved = {{"a", {{"v", 1}, {"metadata", {{"resourceVersion", "2"}}}}}};
  EXPECT_TRUE(changedKeys({{"a", {{"v", 1}, {"metadata", {{"resourceVersion", "1"}}}}}}, moved).empty());
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

namespace podshaper::kube {
namespace {

TEST(PackObject, KeepsKeyAndVersionInTheClearAndGivesTheObjectBack) {
  json labels = json::object();
  for (int i = 0; i < 80; ++i) labels["feature.node.kubernetes.io/cpu-cpuid.F" + std::to_string(i)] = "true";
  const json node = {{"metadata", {{"name", "gpu-1"}, {"resourceVersion", "7"}, {"labels", labels}}},
                     {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
  const json packed = packObject(node);
  EXPECT_EQ(*objectKey(packed), "gpu-1");
  EXPECT_EQ(storedVersionOf(packed), "7");
  ASSERT_TRUE(packed.is_binary());  // one value: no tree beside the bytes
  EXPECT_LT(packed.get_binary().size() * 2, node.dump().size());  // the labels repeat: compressed well
  auto back = unpackObject(packed);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, node);
  EXPECT_EQ(*unpackObject(json{{"kind", "Namespace"}}), (json{{"kind", "Namespace"}}));  // not packed: as it is
  // Namespaced objects keep their namespace in the clear: the store's key.
  EXPECT_EQ(*objectKey(packObject(json{{"metadata", {{"name", "c"}, {"namespace", "ml"}}}})), "ml/c");
}

TEST(PackObject, ChangesOnlyTheVersionAreSameButVersion) {
  json a = {{"metadata", {{"name", "a"}, {"resourceVersion", "1"}}}, {"spec", {{"x", 1}}}};
  json b = a;
  b["metadata"]["resourceVersion"] = "2";
  EXPECT_TRUE(sameButVersion(packObject(a), packObject(b)));
  b["spec"]["x"] = 2;
  EXPECT_FALSE(sameButVersion(packObject(a), packObject(b)));
  // The store's rules on packed objects: a heartbeat of dropped fields changes nothing.
  ObjectStore store;
  ASSERT_TRUE(*applyWatchEvent(store, event("ADDED", packObject(a))));
  a["metadata"]["resourceVersion"] = "3";
  EXPECT_FALSE(*applyWatchEvent(store, event("MODIFIED", packObject(a))));
  EXPECT_EQ(storedVersionOf(store["a"]), "3");
  EXPECT_TRUE(*applyWatchEvent(store, event("MODIFIED", packObject(b))));
}

TEST(PackObject, DamagedBytesAreAnError) {
  json packed = packObject(json{{"metadata", {{"name", "a"}}}, {"spec", std::string(100, 'x')}});
  auto& bytes = packed.get_binary();
  bytes.resize(bytes.size() / 2);
  auto back = unpackObject(packed);
  ASSERT_FALSE(back);
  EXPECT_NE(back.error().message.find("do not uncompress"), std::string::npos);
  bytes.resize(3);  // not even its key's length
  back = unpackObject(packed);
  ASSERT_FALSE(back);
  EXPECT_NE(back.error().message.find("shorter than its lengths say"), std::string::npos);
  EXPECT_FALSE(objectKey(packed));
  EXPECT_EQ(storedVersionOf(packed), "");
  // An object without a name is kept as it is, and the store says what is wrong with it.
  const json nameless = {{"metadata", {{"namespace", "ml"}}}};
  EXPECT_EQ(packObject(nameless), nameless);
}

}  // namespace
}  // namespace podshaper::kube
