#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/policy.h"
#include "judging/events.h"
#include "judging/report_status.h"
#include "judging/verdict.h"

// One reconcile of a node's name, decided: from its GPUTopologyReport, its Node
// and the TopologyPolicies to what the operator writes and when it looks again.
// Pure: the operator's reconciler reads the inputs from its caches, executes the
// plan through the API and keeps what it learns between reconciles.
namespace podshaper {

// How long a report may outlive its Node before it is judged without one (the
// garbage collector normally deletes a report owned by its Node within seconds).
inline constexpr long long kNodeGoneGraceSeconds = 60;

struct PlanInputs {
  const nlohmann::json* report = nullptr;  // null: no GPUTopologyReport of that name; its spec may be kept as text
  const nlohmann::json* node = nullptr;    // null: no Node of that name
  const std::vector<Policy>* policies = nullptr;
  long long now = 0;             // seconds since the epoch
  long long nodeMissingFor = 0;  // seconds since this report was first seen without its Node
  // The containers podshaper-shm holds back on this node for its memlock (judging/memlock_held.h);
  // null: none.
  const std::vector<MemlockHeld>* memlockHeld = nullptr;
};

// An Event to record, and the object it is recorded on.
struct PlannedEvent {
  ObjectRef about;
  EventSpec event;
};

struct Plan {
  enum class Kind {
    ReportGone,  // no report: the Node keeps no verdict it can no longer back
    NodeGoing,   // the report's owner Node was just deleted: wait for the garbage collector
    Judged,
  };
  Kind kind = Kind::Judged;
  std::optional<Verdict> verdict;  // Judged only
  // The status subresource's merge patch, guarded by the report's resourceVersion;
  // null when the status already says it (a steady cluster writes nothing).
  nlohmann::json statusPatch;
  // The transitions that status write records; told only once it succeeded, so
  // that one writer, whichever replica, tells them once.
  std::vector<PlannedEvent> events;
  // The Node's taint and its labels, a merge patch guarded by its resourceVersion; only
  // when the taint changes (its spec); null: the taint is already so, or no Node.
  nlohmann::json nodePatch;
  // A strategic merge patch of the Node's status subresource: its GPUTopologyValidated
  // condition and, unless nodePatch carries them, its labels (guarded by its
  // resourceVersion). A Node's status subresource writes its metadata as well as its
  // status (the API server keeps only the spec), so a Node whose taint stays is written
  // once. Null: already so, or no Node.
  nlohmann::json nodeStatusPatch;
  std::optional<long long> requeueAfter;  // seconds: when Fresh turns False, or the grace for a going Node ends
};

Plan plan(const PlanInputs& in);

// Whether the report names a Node among its owners (the agent makes it so): the
// garbage collector deletes it with its Node.
bool ownedByNode(const nlohmann::json& report);

// A report's spec, whether kept as JSON or as its text; null when the text does not parse.
nlohmann::json reportSpecOf(const nlohmann::json& report);

}  // namespace podshaper
