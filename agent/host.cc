#include "agent/host.h"

#include <sys/resource.h>

#include <fstream>
#include <sstream>
#include <string>

namespace podshaper::agent {

HostInfo readHost() {
  HostInfo host;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.starts_with("MemTotal:")) {
      std::istringstream in(line.substr(9));
      unsigned long long kib = 0;
      if (in >> kib) host.memoryBytes = kib * 1024;
      break;
    }
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) host.memlockBytes = limit.rlim_cur;
  std::ifstream modules("/proc/modules");
  for (std::string line; std::getline(modules, line);) {
    std::string name = line.substr(0, line.find(' '));
    if (name == "nvidia_fs") host.nvidiaFs = true;
    if (name == "nvidia_peermem") host.nvidiaPeermem = true;
  }
  return host;
}

}  // namespace podshaper::agent
