#pragma once

#include "api/topology.h"

namespace podshaper::agent {

// Copies 256 MiB between each GPU pair with cuMemcpyPeerAsync, both directions,
// after warm-ups, and sets bandwidthGBps to the mean one-way rate. Leaves no
// context, stream or allocation behind. An error leaves the pairs unmeasured.
Result<void> measureBandwidth(Topology& topology);

}  // namespace podshaper::agent
