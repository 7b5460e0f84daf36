#pragma once

#include "api/topology.h"

namespace podshaper::agent {

// Host facts: memory (/proc/meminfo), the memlock limit this process got
// (getrlimit; `run --memlock-probe-file` puts what the memlock-probe container got
// in its place: that container carries the NRI annotation shaped pods get), and
// whether nvidia_fs (GDS) and nvidia_peermem are loaded (/proc/modules).
HostInfo readHost();

}  // namespace podshaper::agent
