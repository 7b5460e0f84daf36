#pragma once

#include "metrics/metrics.h"

// The operator's API writes, counted: podshaper_operator_writes_total, defined here once
// for the controllers and reconcilers that write.
namespace podshaper::op {

enum class WriteKind { kReportStatus, kNode, kEvent, kPolicyStatus };

// The counter of `kind`'s writes (label kind: status, node, event, policy_status).
metrics::Counter& writesTotal(metrics::Registry& metrics, WriteKind kind);

}  // namespace podshaper::op
