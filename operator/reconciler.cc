#include "operator/reconciler.h"

#include <algorithm>

#include "cli/logging.h"
#include "judging/events.h"
#include "kube/protocol.h"
#include "operator/writes.h"

namespace podshaper::op {

namespace {
const cli::Logger& kEvent = cli::logger("event");
const cli::Logger& kNode = cli::logger("node");
const cli::Logger& kReport = cli::logger("report");
}  // namespace

using nlohmann::json;

long long SystemClock::wallMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

long long SystemClock::steadySeconds() const {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Reconciler::Reconciler(ReconcileApi& api, const Clock& clock, metrics::Registry& metrics,
                       std::function<bool()> mayWrite, ReconcilerOptions options)
    : api_(api),
      clock_(clock),
      mayWrite_(std::move(mayWrite)),
      options_(std::move(options)),
      writesStatus_(writesTotal(metrics, WriteKind::kReportStatus)),
      writesNode_(writesTotal(metrics, WriteKind::kNode)),
      writesEvent_(writesTotal(metrics, WriteKind::kEvent)),
      conflicts_(conflictsTotal(metrics)),
      reportsValidated_(metrics.gauge("podshaper_operator_reports", "GPUTopologyReports by verdict (leader only).",
                                      {{"verdict", "validated"}})),
      reportsNotValidated_(metrics.gauge("podshaper_operator_reports", "", {{"verdict", "not_validated"}})) {}

void Reconciler::forgetVerdicts() {
  std::lock_guard lock(mu_);
  verdicts_.clear();
  validatedCount_ = notValidatedCount_ = 0;
  reportsValidated_.set(0);
  reportsNotValidated_.set(0);
}

void Reconciler::setVerdict(const std::string& key, const char* verdict) {
  std::lock_guard lock(mu_);
  // Running counts: a loop over every verdict per reconcile was 6% of the CPU at 5,000 nodes.
  auto it = verdicts_.find(key);
  if (it != verdicts_.end()) {
    (it->second == "validated" ? validatedCount_ : notValidatedCount_)--;
    if (verdict == nullptr) {
      verdicts_.erase(it);
    } else {
      it->second = verdict;
    }
  } else if (verdict != nullptr) {
    verdicts_.emplace(key, verdict);
  }
  if (verdict != nullptr) (std::string_view(verdict) == "validated" ? validatedCount_ : notValidatedCount_)++;
  reportsValidated_.set(static_cast<double>(validatedCount_));
  reportsNotValidated_.set(static_cast<double>(notValidatedCount_));
}

bool Reconciler::cacheBehindWrite(Replaced& replaced, const std::string& key, const json& object) {
  std::lock_guard lock(mu_);
  auto it = replaced.find(key);
  if (it == replaced.end()) return false;
  if (std::find(it->second.begin(), it->second.end(), kube::resourceVersionOf(object)) != it->second.end()) {
    return true;
  }
  replaced.erase(it);  // the cache moved on
  return false;
}

void Reconciler::rememberWrite(Replaced& replaced, const std::string& key, const std::string& resourceVersion) {
  std::lock_guard lock(mu_);
  replaced[key].push_back(resourceVersion);
}

long long Reconciler::nodeMissingFor(const std::string& key, bool missing) {
  std::lock_guard lock(mu_);
  if (!missing) {
    nodeMissingSince_.erase(key);
    return 0;
  }
  replacedNode_.erase(key);
  const long long now = clock_.steadySeconds();
  return now - nodeMissingSince_.try_emplace(key, now).first->second;
}

Reconciler::Result Reconciler::reconcile(const std::string& key, const std::optional<json>& report,
                                         const std::optional<json>& node, const std::vector<Policy>& policies,
                                         const std::vector<MemlockHeld>& held) {
  if (!mayWrite_()) return {Outcome::NotLeader, std::nullopt};
  // Our own last write has not reached the cache yet; its watch event queues the key again.
  if ((report && cacheBehindWrite(replacedReport_, key, *report)) ||
      (node && cacheBehindWrite(replacedNode_, key, *node))) {
    return {Outcome::Done, std::nullopt};
  }
  if (!report) forgetReport(key, node.has_value());

  const long long nowSeconds = clock_.wallMicros() / 1000000;
  const Plan p = plan({.report = report ? &*report : nullptr,
                       .node = node ? &*node : nullptr,
                       .policies = &policies,
                       .now = nowSeconds,
                       .nodeMissingFor = report ? nodeMissingFor(key, !node && ownedByNode(*report)) : 0,
                       .memlockHeld = &held});
  switch (p.kind) {
    case Plan::Kind::ReportGone:
      return {node ? writeNode(key, *node, p) : Outcome::Done, std::nullopt};
    case Plan::Kind::NodeGoing:
      return {Outcome::Done, std::chrono::seconds(*p.requeueAfter)};
    case Plan::Kind::Judged:
      break;
  }
  return execute(key, *report, node ? &*node : nullptr, p);
}

void Reconciler::forgetReport(const std::string& key, bool nodeExists) {
  setVerdict(key, nullptr);
  std::lock_guard lock(mu_);
  replacedReport_.erase(key);
  nodeMissingSince_.erase(key);
  if (!nodeExists) replacedNode_.erase(key);
}

Reconciler::Result Reconciler::execute(const std::string& key, const json& report, const json* node,
                                       const Plan& p) {
  const Verdict& verdict = *p.verdict;
  setVerdict(key, verdict.validated ? "validated" : "not_validated");

  if (!p.statusPatch.is_null()) {
    if (!mayWrite_()) return {Outcome::NotLeader, std::nullopt};
    auto written = api_.patchReportStatus(key, p.statusPatch);
    // Deleted meanwhile (Done): its DELETED event queues the name again; nothing to look at later.
    if (!written) return {writeFailed("report", key, written.error()), std::nullopt};
    writesStatus_.inc();
    {
      std::lock_guard lock(mu_);
      replacedReport_.erase(key);
    }
    rememberWrite(replacedReport_, key, kube::resourceVersionOf(report));
    const Condition* validated = verdict.condition(conditions::kValidated);
    kReport.info({{"report", key},
                  {"validated", validated->status},
                  {"reason", validated->reason},
                  {"gpus", verdict.gpus},
                  {"interconnect", verdict.interconnect},
                  {"p2p", verdict.p2p},
                  {"memlock", verdict.memlock}},
                 "judged");
    recordEvents(p.events);
  }
  if (node != nullptr) {
    if (Outcome o = writeNode(key, *node, p); o != Outcome::Done) return {o, std::nullopt};
  }
  if (p.requeueAfter) return {Outcome::Done, std::chrono::seconds(*p.requeueAfter)};
  return {Outcome::Done, std::nullopt};
}

Reconciler::Outcome Reconciler::writeFailed(const char* what, const std::string& key, const kube::ApiError& error) {
  if (error.isNotFound()) return Outcome::Done;  // deleted meanwhile: its DELETED event follows
  // what: "report", "node" or "node status": the object's logger, the part in words.
  const std::string_view w(what);
  const cli::Logger& log = w == "report" ? kReport : kNode;
  const std::string_view part = w == "node status" ? "status " : "";
  if (error.isConflict()) {
    conflicts_.inc();
    log.info({{log.name(), key}}, "{}changed since read; judging it again ({})", part, error.message);
  } else {
    log.warn({{log.name(), key}}, "{}not written: {}", part, error.message);
  }
  return Outcome::Retry;
}

Reconciler::Outcome Reconciler::writeNode(const std::string& key, const json& node, const Plan& p) {
  if (p.nodePatch.is_null() && p.nodeStatusPatch.is_null()) return Outcome::Done;
  if (!mayWrite_()) return Outcome::NotLeader;
  {
    std::lock_guard lock(mu_);
    replacedNode_.erase(key);
  }
  std::string version = kube::resourceVersionOf(node);
  if (!p.nodePatch.is_null()) {
    auto written = api_.patchNode(key, p.nodePatch);
    if (!written) return writeFailed("node", key, written.error());
    writesNode_.inc();
    rememberWrite(replacedNode_, key, version);
    version = kube::resourceVersionOf(*written);
    kNode.info({{"node", key}}, "{}", p.nodePatch.dump());
  }
  if (!p.nodeStatusPatch.is_null()) {
    if (!mayWrite_()) return Outcome::NotLeader;
    auto written = api_.patchNodeStatus(key, p.nodeStatusPatch);
    const json* metadata = p.nodeStatusPatch.contains("metadata") ? &p.nodeStatusPatch["metadata"] : nullptr;
    if (!written && written.error().isForbidden() && metadata != nullptr) {
      return labelNodeItself(key, *metadata, written.error());
    }
    if (!written) return writeFailed("node status", key, written.error());
    writesNode_.inc();
    rememberWrite(replacedNode_, key, version);
    if (metadata != nullptr && metadata->contains("labels")) {
      kNode.info({{"node", key}}, "{}", (*metadata)["labels"].dump());
    }
  }
  return Outcome::Done;
}

// RBAC from before the labels went with the condition (a chart that grants the Node's
// patch, not its status's): the labels through the Node itself, as then. The condition
// waits for the grant, retried as any failed write.
Reconciler::Outcome Reconciler::labelNodeItself(const std::string& key, const json& metadata,
                                                const kube::ApiError& refused) {
  kNode.warn({{"node", key}},
             "its status subresource was refused ({}): where RBAC refused it, grant the operator patch on "
             "nodes/status; its labels go to the Node itself meanwhile, its condition is not written",
             refused.message);
  if (!mayWrite_()) return Outcome::NotLeader;
  auto written = api_.patchNode(key, {{"metadata", metadata}});
  if (!written) return writeFailed("node", key, written.error());
  writesNode_.inc();
  rememberWrite(replacedNode_, key, metadata.value("resourceVersion", std::string()));
  kNode.info({{"node", key}}, "{}", metadata.value("labels", json::object()).dump());
  return Outcome::Retry;
}

void Reconciler::recordEvents(const std::vector<PlannedEvent>& events) {
  for (const auto& [about, e] : events) {
    unsigned sequence;
    {
      std::lock_guard lock(mu_);
      sequence = eventSequence_++;
    }
    const json event =
        eventObject(about, e, options_.eventNamespace, options_.identity, clock_.wallMicros(), sequence);
    auto created = api_.createEvent(options_.eventNamespace, event);
    if (!created) {
      // Best effort, as in client-go's recorder: the status already says it.
      kEvent.warn({{"event", e.reason}, {"type", e.type}, {"on", about.kind + " " + about.name}}, "not recorded: {}",
                  created.error().message);
      continue;
    }
    writesEvent_.inc();
  }
}

}  // namespace podshaper::op
