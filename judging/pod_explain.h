#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "judging/events.h"
#include "judging/node_facts.h"

// A shaped pod explains itself (docs/operator.md "Shaped pods explain themselves"): why it
// waits Pending, and why it died when /dev/shm ran out. Pure: the operator's pod
// reconciler reads the pods podshaper shaped (label podshaper.io/shaped), its Node and
// report caches, and records what these functions say as Events.
namespace podshaper {

namespace reasons {
inline constexpr const char* kNotPlaceable = "NotPlaceable";
inline constexpr const char* kShmExhausted = "ShmExhausted";
}  // namespace reasons

// Every PendingJudgement::cause, in reading order (the metrics' series start from these).
inline constexpr const char* kNotPlaceableCauses[] = {"gpu-count", "validated", "memlock",        "p2p",      "selector",
                                                      "cordoned",  "taint",     "node-exclusive", "scheduler"};

struct PendingJudgement {
  bool pending = false;  // unscheduled, and not going away
  // NotPlaceable, once the pod has waited longer than the grace.
  std::optional<EventSpec> event;
  // The event's message without how long the pod has waited: it is told again only when
  // this changes.
  std::string answer;
  // What stops the nodes that come closest (the last requirement, in reading order, that
  // any node fails), for the metrics: gpu-count, validated, memlock, p2p, selector,
  // cordoned, taint, node-exclusive; "scheduler" when podshaper's requirements are met.
  std::string cause;
  // Seconds until the pod should be looked at again (the grace's end, then a steady
  // recheck while it waits); unset when it is not pending.
  std::optional<long long> lookAgainAfter;
};

// A pod that no node has taken for longer than `graceSeconds`: which of its requirements
// (podshaper's node labels first, then its own selectors, taints, cordons and the
// node-exclusive rule) how many nodes fail, with examples. now: seconds since the epoch.
// Whether judgePending would explain `pod` now (unscheduled past the grace, not held by
// scheduling gates): the nodes' facts are worth gathering only then.
bool waitsToBeExplained(const nlohmann::json& pod, long long now, long long graceSeconds);

PendingJudgement judgePending(const nlohmann::json& pod, const std::vector<NodeFacts>& nodes, long long now,
                              long long graceSeconds);

// What ran out of /dev/shm.
enum class ShmCause { kDataLoader, kNccl, kSigbus };
const char* toString(ShmCause cause);  // "dataloader", "nccl", "sigbus" (the metrics' label)

struct ShmFailure {
  std::string container;
  ShmCause cause = ShmCause::kSigbus;
  // The run that died was not the container's first in this pod: its /dev/shm held
  // what earlier runs left.
  bool restarted = false;
  // Tells one failure once: pod uid, container, first or restarted run, cause.
  std::string key;
  EventSpec event;  // on the pod
};

// A run that ended with an error whose termination message (the log's last 2 KiB or 80
// lines) names no cause, although it was cut there: the log before it may (the tracebacks
// of a DataLoader's other workers often come after the Bus error line).
struct LogToRead {
  std::string container;
  bool previous = false;  // the run before the container's current one (pods/log previous=true)
  std::string key;        // "uid/container/run": read once
};
std::vector<LogToRead> logsToRead(const nlohmann::json& pod);

// The lines of a log that judgeTerminations reads (those that speak of /dev/shm, SIGBUS
// or a DataLoader worker's death), joined, the first 8 KiB of them: what is worth keeping
// of a long log.
std::string shmEvidence(const std::string& log);

// Every terminated container (now, or its last run) that died for lack of /dev/shm:
// exit code 135 (SIGBUS), PyTorch DataLoader's shared-memory errors or NCCL's
// "No space left on device" on /dev/shm, read from its termination message (the log's
// tail: the webhook sets FallbackToLogsOnError), or where that names none, from
// `logs` (LogToRead::key → what was read of that run's log).
std::vector<ShmFailure> judgeTerminations(const nlohmann::json& pod,
                                          const std::map<std::string, std::string>& logs = {});

// The pod's controller (a Job, JobSet, ReplicaSet, …), which is told too; unset when none.
std::optional<ObjectRef> controllerOf(const nlohmann::json& pod);

// The same Event, told on the pod's controller: it names the pod.
EventSpec ownerEvent(const nlohmann::json& pod, const ShmFailure& failure);

}  // namespace podshaper
