#include "judging/events.h"

#include <cstdio>

#include "base/timefmt.h"

namespace podshaper {

nlohmann::json eventObject(const ObjectRef& about, const EventSpec& event, const std::string& ns,
                           const std::string& reportingInstance, long long nowMicros, unsigned sequence) {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".%llx%04x", static_cast<unsigned long long>(nowMicros), sequence & 0xffff);
  std::string message = event.message;
  if (message.size() > 1024) {
    message.resize(1021);
    while (!message.empty() && (static_cast<unsigned char>(message.back()) & 0xC0) == 0x80) message.pop_back();
    if (!message.empty() && static_cast<unsigned char>(message.back()) >= 0xC0) message.pop_back();
    message += "...";
  }
  const std::string now = formatTime(nowMicros / 1000000);
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", about.name + suffix}, {"namespace", ns}}},
          {"involvedObject", {{"apiVersion", about.apiVersion}, {"kind", about.kind}, {"name", about.name},
                              {"uid", about.uid}}},
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
