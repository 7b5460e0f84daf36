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

// Whether two objects are the same but for metadata.resourceVersion: what an informer
// keeps of an object (its transform) did not change, although the object did (a
// kubelet's status heartbeat on a Node of which only labels and allocatable are kept).
bool sameButVersion(const nlohmann::json& a, const nlohmann::json& b);

// A store may keep each object packed: one JSON binary value holding its store key and
// resourceVersion as they are (what the rules here read: objectKey, storedVersionOf,
// sameButVersion, applyWatchEvent) and the rest compressed (zlib over its JSON text,
// without the resourceVersion, so that sameButVersion holds for packed objects too). A
// Node's labels or a report's spec as a tree of nlohmann values cost about ten times
// their packed bytes: at 12,500 Nodes and reports and 100,000 ResourceClaims, the
// difference is the operator's and the webhook's memory targets. Informer's get() and
// snapshot() give the objects back whole. An object without metadata.name is kept as it is.
nlohmann::json packObject(const nlohmann::json& object);
// The object packObject packed; any other value as it is. An Error when the packed bytes
// are damaged.
Result<nlohmann::json> unpackObject(const nlohmann::json& stored);
// resourceVersionOf an object as a store keeps it, packed or not.
std::string storedVersionOf(const nlohmann::json& stored);

// Applies ADDED/MODIFIED (insert or replace) and DELETED (erase) to the store.
// Returns whether the store changed: an event whose object has the resourceVersion
// already stored, or is the same but for it (sameButVersion: stored, no change), a
// DELETED of an unknown key, BOOKMARK and ERROR change nothing.
// An Error for an object without metadata.name.
Result<bool> applyWatchEvent(ObjectStore& store, const WatchEvent& event);

// The keys whose objects differ between two stores (added, removed or changed but for
// their resourceVersion), sorted: what a relist changed, for reconcilers that work key
// by key.
std::vector<std::string> changedKeys(const ObjectStore& before, const ObjectStore& after);

}  // namespace podshaper::kube
