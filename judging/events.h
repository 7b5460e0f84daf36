#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "judging/report_status.h"

namespace podshaper {

// The object an Event is about (core/v1 ObjectReference). For `kubectl describe`
// to find an Event, kind, name and uid must be the object's own.
struct ObjectRef {
  std::string apiVersion, kind, name, uid;
  std::string ns{};  // a namespaced object's namespace (the Event's own); empty for cluster-scoped ones
};

// A core/v1 Event in namespace `ns` (cluster-scoped objects' Events live in
// "default"). The name is unique per (object, time, sequence); a message over
// 1024 bytes is cut, as kubectl shows it on one line.
nlohmann::json eventObject(const ObjectRef& about, const EventSpec& event, const std::string& ns,
                           const std::string& reportingInstance, long long nowMicros, unsigned sequence);

}  // namespace podshaper
