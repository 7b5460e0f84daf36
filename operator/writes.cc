#include "operator/writes.h"

namespace podshaper::op {

metrics::Counter& writesTotal(metrics::Registry& metrics, WriteKind kind) {
  const char* label = "status";
  switch (kind) {
    case WriteKind::kReportStatus: label = "status"; break;
    case WriteKind::kNode: label = "node"; break;
    case WriteKind::kEvent: label = "event"; break;
    case WriteKind::kPolicyStatus: label = "policy_status"; break;
    case WriteKind::kShmProfile: label = "shm_profile"; break;
  }
  return metrics.counter(
      "podshaper_operator_writes_total",
      "API writes, by kind: report status, Node labels/taint, Events, TopologyPolicy status, ShmProfiles.",
      {{"kind", label}});
}

metrics::Counter& conflictsTotal(metrics::Registry& metrics) {
  return metrics.counter("podshaper_operator_conflicts_total",
                         "Writes refused because the object changed since it was read (retried).");
}

}  // namespace podshaper::op
