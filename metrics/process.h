#pragma once

#include <string>

#include "metrics/metrics.h"

// What every podshaper binary says of itself on /metrics: which build it is, and the
// process's own figures under the names Prometheus' client libraries use, so that the
// dashboards and alerts written for other exporters work unchanged.
namespace podshaper::metrics {

// podshaper_build_info{component, version} 1.
void registerBuildInfo(Registry& registry, const std::string& component, const std::string& version);

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds and process_start_time_seconds, read from /proc/self
// now (call before each render), and podshaper_heap_bytes{state="in_use"|"free_held"} as
// the allocator says (metrics/heap.h). A figure not given is left as it was.
void updateProcessMetrics(Registry& registry);

}  // namespace podshaper::metrics
