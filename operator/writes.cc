#include "operator/writes.h"

namespace podshaper::op {

metrics::Counter& writesTotal(metrics::Registry& metrics, WriteKind kind) {
  const char* label = "status";
  switch (kind) {
    case WriteKind::kReportStatus: label = "status"; break;
    case WriteKind::kNode: label = "node"; break;
    case WriteKind::kEvent: label = "event"; break;
    case WriteKind::kPolicyStatus: label = "policy_status"; break;
  }
  return metrics.counter("podshaper_operator_writes_total",
                         "API writes, by kind: report status, Node labels/taint, Events, TopologyPolicy status.",
                         {{"kind", label}});
}

}  // namespace podshaper::op
