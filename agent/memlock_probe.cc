#include "agent/memlock_probe.h"

#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>

#include "api/names.h"
#include "base/json_util.h"
#include "cli/flags.h"
#include "cli/logging.h"
#include "cli/signals.h"

namespace podshaper::agent {
namespace {
const cli::Logger& kLog = cli::logger("memlock-probe");

using nlohmann::json;

// The reasons a container runtime gives when it cannot start a container: an
// RLIMIT_MEMLOCK it may not raise fails runc's init ("error setting rlimit type 8:
// operation not permitted"), reported as StartError, then CrashLoopBackOff.
const std::set<std::string, std::less<>> kNotStarted = {"StartError", "RunContainerError", "CreateContainerError",
                                                        "CrashLoopBackOff"};

int fail(const std::string& message) {
  std::cerr << "podshaper-agent memlock-probe: " << message << "\n";
  return 2;
}

}  // namespace

std::string memlockRlimitJson(const MemlockRlimit& limit) {
  auto bytes = [](const std::optional<uint64_t>& v) { return v ? json(*v) : json(nullptr); };
  return json{{"soft", bytes(limit.soft)}, {"hard", bytes(limit.hard)}}.dump() + "\n";
}

Result<MemlockRlimit> parseMemlockRlimit(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return makeError("expected {\"soft\": N, \"hard\": N} (null: unlimited)");
  MemlockRlimit limit;
  for (auto [key, field] : {std::pair{"soft", &limit.soft}, std::pair{"hard", &limit.hard}}) {
    const json& v = member(j, key);
    if (v.is_number_unsigned()) {
      *field = v.get<uint64_t>();
    } else if (!v.is_null() || !j.contains(key)) {
      return makeError(std::string("\"") + key + "\": expected bytes or null (unlimited)");
    }
  }
  return limit;
}

MemlockProbeStatus memlockProbeFromPod(const json& pod) {
  MemlockProbeStatus out;
  const json& statuses = member(member(pod, "status"), "containerStatuses");
  if (!statuses.is_array()) return out;
  for (const json& s : statuses) {
    if (stringMember(s, "name") != names::kMemlockProbeContainer) continue;
    const json& state = member(s, "state");
    const json& waiting = member(state, "waiting");
    const json& terminated = member(state, "terminated");
    const json& last = member(member(s, "lastState"), "terminated");
    const std::string reason =
        !stringMember(waiting, "reason").empty() ? stringMember(waiting, "reason") : stringMember(terminated, "reason");
    if (!kNotStarted.contains(reason)) return out;
    out.state = MemlockProbeStatus::State::kNotGranted;
    // The runtime's words are in the termination; a back-off's own message
    // ("back-off 10s restarting failed container=...") changes with every restart.
    for (const json* from : {&last, &terminated, &waiting}) {
      if (!stringMember(*from, "message").empty()) {
        out.message = stringMember(*from, "message");
        break;
      }
    }
    if (out.message.empty()) out.message = reason;
    while (!out.message.empty() && (out.message.back() == '\n' || out.message.back() == ' ')) out.message.pop_back();
    return out;
  }
  return out;
}

void applyMemlockProbe(HostInfo& host, const MemlockProbeStatus& status, const MemlockLimit& requested) {
  switch (status.state) {
    case MemlockProbeStatus::State::kWaiting:
      return;
    case MemlockProbeStatus::State::kGranted:
      host.memlockBytes = status.memlockBytes;
      host.memlockProbe = MemlockProbe{requested, true, ""};
      return;
    case MemlockProbeStatus::State::kNotGranted:
      host.memlockProbe = MemlockProbe{requested, false, status.message};
      return;
  }
}

int runMemlockProbe(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2, {"output"});
  if (!flags) return fail(flags.error().message);
  if (auto ok = flags->require({"output"}); !ok) return fail(ok.error().message);
  const std::string output = *flags->get("output");

  // Blocked before anything else, so that a SIGTERM while writing is not lost.
  const sigset_t signals = cli::blockStopSignals();

  rlimit got{};
  if (getrlimit(RLIMIT_MEMLOCK, &got) != 0) return fail(std::string("getrlimit(RLIMIT_MEMLOCK): ") + std::strerror(errno));
  auto bytes = [](rlim_t v) { return v == RLIM_INFINITY ? std::optional<uint64_t>() : std::optional<uint64_t>(v); };
  const MemlockRlimit limit{bytes(got.rlim_cur), bytes(got.rlim_max)};
  // The agent reads the file whenever it likes: it must never see half of it.
  const std::string tmp = output + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << memlockRlimitJson(limit);
    out.close();
    if (!out) return fail(tmp + ": " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), output.c_str()) != 0) return fail(output + ": " + std::strerror(errno));
  kLog.info("RLIMIT_MEMLOCK soft {} hard {}, written to {}; waiting for SIGTERM", MemlockLimit{limit.soft}.text(),
            MemlockLimit{limit.hard}.text(), output);

  int signal = 0;
  sigwait(&signals, &signal);
  kLog.info("signal received, stopping");
  return 0;
}

}  // namespace podshaper::agent
