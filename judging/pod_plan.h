#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "judging/events.h"
#include "judging/node_facts.h"
#include "judging/pending.h"
#include "judging/rejected_by_kubelet.h"
#include "judging/shm_exhausted.h"

// One look at a shaped pod, decided (docs/operator.md "Shaped pods explain themselves"):
// from the pod, what was read of its logs, the nodes' facts and what was told before, to
// the Events to tell, what to remember of them and when to look again. Pure, in two steps
// around the reads: podAsks says what to read, planPod what to tell. The operator's pod
// reconciler reads, tells, and keeps the PodMemories between looks.
namespace podshaper {

// A waiting pod's NotPlaceable is told again for new words (same cause) at most this often.
inline constexpr long long kRetellAfterSeconds = 600;
// After pods/log answered 403, logs are not asked for again this long.
inline constexpr long long kLogsForbiddenSeconds = 600;
// Told-once memories are per pod and forgotten with it; controllers' outlive their pods,
// so that set is bounded by dropping it whole (a controller may then be told again).
inline constexpr std::size_t kMaxOwnersRemembered = 100000;

// The NotPlaceable told of a pod.
struct ToldPending {
  std::string answer;  // without how long it had waited (PendingJudgement::answer)
  PendingCause cause = PendingCause::kScheduler;
  long long at = 0;  // seconds since the epoch
};

// What is remembered of one pod (one uid) between looks.
struct PodMemory {
  std::string uid;
  std::optional<ToldPending> toldPending{};
  std::set<std::string> toldFailures{};  // ShmFailure::key and KubeletRejection::key told on the pod
  // LogToRead::key → shmEvidence of what was read: each run's log is read once.
  std::map<std::string, std::string> logEvidence{};
};

// What one look starts from: the pod's memory and the shared ones, as they were.
struct ToldState {
  PodMemory pod;
  bool ownerTold = false;                    // the pod's controller was told (of any of its pods)
  std::optional<long long> logsForbiddenAt;  // when pods/log last answered 403
};

// What one Event told adds to the memories.
struct Told {
  std::string failure{};  // a ShmFailure::key or KubeletRejection::key, told on the pod
  std::string owner{};    // a controller's uid
  std::optional<ToldPending> pending{};
};

// What a look learnt whatever its Events became.
struct Learnt {
  std::map<std::string, std::string> logEvidence;  // replaces the pod's: runs no longer listed are forgotten
  std::optional<long long> logsForbiddenAt;        // set: pods/log answered 403 now
  bool forgetPending = false;                      // no longer waits: a later wait is told anew
};

// Every pod's memory (by its key, namespace/name) and the controllers'. Plain data: the
// reconciler guards it.
struct PodMemories {
  std::map<std::string, PodMemory> pods;
  std::set<std::string> toldOwners;
  std::optional<long long> logsForbiddenAt;

  // What a look at pod `key` of `uid` (controller `ownerUid`, empty: none) starts from. A
  // pod deleted and made again under its name (a StatefulSet's, a training operator's
  // "job-master-0") before this look: the earlier one's memories go now.
  ToldState look(const std::string& key, const std::string& uid, const std::string& ownerUid);
  void learn(const std::string& key, const std::string& uid, const Learnt& learnt);
  void remember(const std::string& key, const std::string& uid, const Told& told);
  void forget(const std::string& key);  // the pod is gone
  // The memory of pod `key`, fresh when it was of another uid.
  PodMemory& of(const std::string& key, const std::string& uid);
};

// What to read before planning.
struct PodAsks {
  std::vector<LogToRead> logs;                // to read now
  std::map<std::string, std::string> known;   // evidence read before, of runs still listed
  bool nodes = false;                         // the nodes' facts are needed (the pod waits past its grace)
  // The pod's ShmUsage is needed: a container's run ended with an error, and what it died
  // of may be told yet (a log to read, or a failure not told on the pod or its controller).
  bool shmUsage = false;
};

// The logs that logsToRead names, but those read before and, while pods/log answers 403
// (kLogsForbiddenSeconds), none; whether the ShmUsage is needed. now: seconds since the epoch.
PodAsks podAsks(const nlohmann::json& pod, const ToldState& told, long long now, long long graceSeconds);

// How a log asked for was answered.
struct LogRead {
  enum class Kind {
    Read,       // text is the log
    Gone,       // 404: the kubelet keeps two runs; judged from the message
    Forbidden,  // 403: RBAC grants no pods/log
    Failed,     // may pass: read again on a later look
  };
  Kind kind = Kind::Read;
  std::string text;
};

// An Event to tell, and what its telling adds to the memories.
struct PodTell {
  ObjectRef about;
  EventSpec event;
  std::string cause{};      // the metric's label; empty on a controller (not counted)
  std::string container{};  // a ShmExhausted's, for the log
  // Told only when the tell at `after` (an index in PodPlan::tells) was told in this look,
  // and none of `unless` was: a controller is told once, of the first failure told.
  std::optional<std::size_t> after{};
  std::vector<std::size_t> unless{};
  Told remember{};
};

struct PodPlanInputs {
  const nlohmann::json* pod = nullptr;
  const ToldState* told = nullptr;
  const PodAsks* asks = nullptr;
  const std::map<std::string, LogRead>* reads = nullptr;  // LogToRead::key → its answer; a log not read is absent
  const std::vector<NodeFacts>* nodes = nullptr;           // null: not read (PodAsks::nodes was false)
  const nlohmann::json* shmUsage = nullptr;                // the pod's ShmUsage; null: not read, or none
  long long now = 0;                                       // seconds since the epoch
  long long graceSeconds = 0;                              // pendingGrace
};

struct PodPlan {
  std::vector<PodTell> tells;  // in order; one that fails is told on the next look
  Learnt learnt;
  bool readFailed = false;  // a log read failed for now: look again soon
  std::optional<long long> lookAgainAfter;  // seconds
};

PodPlan planPod(const PodPlanInputs& in);

}  // namespace podshaper
