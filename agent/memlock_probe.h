#pragma once

// The memlock-probe: a second container in the agent's pod that carries the NRI
// ulimit annotation shaped pods get, so the container runtime starts it with the
// same RLIMIT_MEMLOCK (and then it writes what it got), or cannot start it at all
// (and then its status in the pod says why). The agent's own container carries no
// such annotation, so it always starts and can report either way (docs/agent.md).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/memlock.h"
#include "api/topology.h"
#include "base/result.h"

namespace podshaper::agent {

// What the probe writes: its getrlimit(RLIMIT_MEMLOCK) as {"soft": N, "hard": N},
// null for unlimited (RLIM_INFINITY).
struct MemlockRlimit {
  std::optional<uint64_t> soft, hard;
  bool operator==(const MemlockRlimit&) const = default;
};
std::string memlockRlimitJson(const MemlockRlimit& limit);
// The error says what is wrong with the text: `"soft": expected bytes or null`.
Result<MemlockRlimit> parseMemlockRlimit(std::string_view text);

// What the agent knows of its memlock-probe: nothing yet (it has neither written
// nor failed), what it got, or that the runtime could not start it.
struct MemlockProbeStatus {
  enum class State { kWaiting, kGranted, kNotGranted };
  State state = State::kWaiting;
  std::optional<uint64_t> memlockBytes;  // granted: its soft limit; null: unlimited
  std::string message;                   // not granted: the runtime's words
  bool operator==(const MemlockProbeStatus&) const = default;
};

// The memlock-probe container's status in its Pod (as GET pods/NAME returns it):
// not granted when it is waiting or terminated with StartError, RunContainerError,
// CreateContainerError or CrashLoopBackOff (the message is the runtime's, from the
// last termination where there is one); otherwise waiting, since only the file
// it writes says what it got.
MemlockProbeStatus memlockProbeFromPod(const nlohmann::json& pod);

// Puts what the probe found into the report's host: memlockProbe, and when granted
// memlockBytes (the node's memlock, in place of the agent's own). Waiting: unchanged.
void applyMemlockProbe(HostInfo& host, const MemlockProbeStatus& status, const MemlockLimit& requested);

// `podshaper-agent memlock-probe --output FILE`: writes this process's RLIMIT_MEMLOCK
// to FILE (a temporary file, then renamed), then waits for SIGTERM and exits 0.
int runMemlockProbe(int argc, char** argv);

}  // namespace podshaper::agent
