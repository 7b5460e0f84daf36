#include "kube/store.h"

namespace podshaper::kube {

Result<std::string> objectKey(const nlohmann::json& object) {
  if (!object.is_object()) return makeError("object is not a JSON object");
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return makeError("object has no metadata");
  auto name = meta->find("name");
  if (name == meta->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return makeError("object has no metadata.name");
  }
  auto ns = meta->find("namespace");
  if (ns != meta->end() && ns->is_string() && !ns->get_ref<const std::string&>().empty()) {
    return ns->get<std::string>() + "/" + name->get<std::string>();
  }
  return name->get<std::string>();
}

ObjectStore storeFromList(const nlohmann::json& list) {
  ObjectStore store;
  if (!list.is_object()) return store;
  auto items = list.find("items");
  if (items == list.end() || !items->is_array()) return store;
  for (const auto& item : *items) {
    auto key = objectKey(item);
    if (key) store[*key] = item;
  }
  return store;
}

ObjectStore storeFromList(nlohmann::json&& list) {
  ObjectStore store;
  if (!list.is_object()) return store;
  auto items = list.find("items");
  if (items == list.end() || !items->is_array()) return store;
  for (auto& item : *items) {
    auto key = objectKey(item);
    if (key) store[*key] = std::move(item);
  }
  return store;
}

Result<bool> applyWatchEvent(ObjectStore& store, const WatchEvent& event) {
  if (event.type == "BOOKMARK" || event.type == "ERROR") return false;
  auto key = objectKey(event.object);
  if (!key) return makeError("watch " + event.type + " event: " + key.error().message);
  if (event.type == "DELETED") return store.erase(*key) > 0;
  if (event.type != "ADDED" && event.type != "MODIFIED") {
    return makeError("watch event: unknown type \"" + event.type + "\"");
  }
  auto it = store.find(*key);
  if (it == store.end()) {
    store.emplace(*key, event.object);
    return true;
  }
  const std::string newRv = resourceVersionOf(event.object);
  if (!newRv.empty() && newRv == resourceVersionOf(it->second)) return false;
  it->second = event.object;
  return true;
}

std::vector<std::string> changedKeys(const ObjectStore& before, const ObjectStore& after) {
  std::vector<std::string> keys;
  auto b = before.begin();
  auto a = after.begin();
  while (b != before.end() || a != after.end()) {
    if (a == after.end() || (b != before.end() && b->first < a->first)) {
      keys.push_back((b++)->first);
    } else if (b == before.end() || a->first < b->first) {
      keys.push_back((a++)->first);
    } else {
      if (b->second != a->second) keys.push_back(a->first);
      ++a;
      ++b;
    }
  }
  return keys;
}

}  // namespace podshaper::kube
