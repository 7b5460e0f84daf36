#pragma once

#include "core/topology.h"

namespace podshaper::agent {

// Host facts: memory (/proc/meminfo), the memlock limit this process got
// (getrlimit: what a shaped pod gets, since the agent's pod carries the same NRI
// annotation), and whether nvidia_fs (GDS) and nvidia_peermem are loaded (/proc/modules).
HostInfo readHost();

}  // namespace podshaper::agent
