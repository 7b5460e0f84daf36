#pragma once

// An informer's cache as plain data, and the pure rules that keep it: a list
// replaces it, a watch event updates it.

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "kube/protocol.h"

namespace podshaper::kube {

// Objects by key: "namespace/name", or "name" for cluster-scoped objects.
using ObjectStore = std::map<std::string, nlohmann::json>;

// The store key of an object, or an Error when it has no metadata.name.
Result<std::string> objectKey(const nlohmann::json& object);

// A store holding a List's items (items without a name are skipped).
ObjectStore storeFromList(const nlohmann::json& list);
// The same, moving the items out of `list` (a list of thousands is not copied).
ObjectStore storeFromList(nlohmann::json&& list);

// Applies ADDED/MODIFIED (insert or replace) and DELETED (erase) to the store.
// Returns whether the store changed: an event whose object has the resourceVersion
// already stored, a DELETED of an unknown key, BOOKMARK and ERROR change nothing.
// An Error for an object without metadata.name.
Result<bool> applyWatchEvent(ObjectStore& store, const WatchEvent& event);

// The keys whose objects differ between two stores (added, removed or changed),
// sorted: what a relist changed, for reconcilers that work key by key.
std::vector<std::string> changedKeys(const ObjectStore& before, const ObjectStore& after);

}  // namespace podshaper::kube
