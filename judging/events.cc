#include "judging/events.h"

#include <cstdio>

#include "base/text.h"
#include "base/timefmt.h"

namespace podshaper {

nlohmann::json eventObject(const ObjectRef& about, const EventSpec& event, const std::string& ns,
                           const std::string& reportingInstance, long long nowMicros, unsigned sequence) {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".%llx%04x", static_cast<unsigned long long>(nowMicros), sequence & 0xffff);
  const std::string message = cutUtf8(event.message, 1024);
  const std::string now = formatTime(nowMicros / 1000000);
  nlohmann::json involved = {{"apiVersion", about.apiVersion}, {"kind", about.kind}, {"name", about.name},
                             {"uid", about.uid}};
  if (!about.ns.empty()) involved["namespace"] = about.ns;
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", about.name + suffix}, {"namespace", ns}}},
          {"involvedObject", std::move(involved)},
          {"type", event.type},
          {"reason", event.reason},
          {"message", message},
          {"source", {{"component", "podshaper-operator"}}},
          {"reportingComponent", "podshaper-operator"},
          {"reportingInstance", reportingInstance},
          {"firstTimestamp", now},
          {"lastTimestamp", now},
          {"count", 1}};
}

}  // namespace podshaper
