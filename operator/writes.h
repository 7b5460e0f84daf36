#pragma once

#include "metrics/metrics.h"

// The operator's API writes, counted: podshaper_operator_writes_total, defined here once
// for the controllers and reconcilers that write.
namespace podshaper::op {

enum class WriteKind { kReportStatus, kNode, kEvent, kPolicyStatus, kShmProfile };

// The counter of `kind`'s writes (label kind: status, node, event, policy_status, shm_profile).
metrics::Counter& writesTotal(metrics::Registry& metrics, WriteKind kind);
// podshaper_operator_conflicts_total: writes refused because the object changed since it was read.
metrics::Counter& conflictsTotal(metrics::Registry& metrics);

}  // namespace podshaper::op
