#include "operator/pod_reconciler.h"

#include <algorithm>

#include "base/json_util.h"
#include "cli/logging.h"
#include "operator/writes.h"

namespace podshaper::op {

namespace {
const cli::Logger& kEvent = cli::logger("event");
const cli::Logger& kLog = cli::logger("pod");
}  // namespace

using nlohmann::json;

PodReconciler::PodReconciler(ReconcileApi& api, const Clock& clock, metrics::Registry& metrics,
                             std::function<bool()> mayWrite, PodReconcilerOptions options)
    : api_(api),
      clock_(clock),
      mayWrite_(std::move(mayWrite)),
      options_(std::move(options)),
      metrics_(metrics),
      writesEvent_(writesTotal(metrics, WriteKind::kEvent)) {
  // Every series from 0, so that an alert on increase() sees the first Event of each.
  for (PendingCause cause : kPendingCauses) podEvents(reasons::kNotPlaceable, toString(cause));
  for (ShmCause cause : kShmCauses) podEvents(reasons::kShmExhausted, toString(cause));
  for (RejectionCause cause : kRejectionCauses) podEvents(reasons::kRejectedByKubelet, toString(cause));
}

bool PodReconciler::tell(const PodTell& t) {
  const ObjectRef& about = t.about;
  const EventSpec& event = t.event;
  auto created =
      api_.createEvent(about.ns, eventObject(about, event, about.ns, options_.identity, clock_.wallMicros(),
                                             eventSequence_.fetch_add(1, std::memory_order_relaxed)));
  if (!created) {
    kEvent.warn({{"event", event.reason}, {"type", event.type}, {"on", about.kind + " " + about.ns + "/" + about.name}},
                "not recorded: {}", created.error().message);
    return false;
  }
  writesEvent_.inc();
  return true;
}

std::map<std::string, LogRead> PodReconciler::readLogs(const json& pod, const std::vector<LogToRead>& asks) {
  std::map<std::string, LogRead> reads;
  const json& meta = member(pod, "metadata");
  const std::string ns = stringMember(meta, "namespace");
  const std::string name = stringMember(meta, "name");
  for (const LogToRead& ask : asks) {
    auto read = api_.readLog(ns, name, ask.container, ask.previous);
    LogRead& answer = reads[ask.key];
    if (read) {
      answer.text = std::move(*read);
    } else if (read.error().code == 403) {
      kLog.warn({{"pod", ns + "/" + name}},
                "pods/log is not allowed ({}): a container's death is judged from its termination message only "
                "(the log's last 2 KiB) for the next {} minutes; grant the operator pods/log get to read further back",
                read.error().message, kLogsForbiddenSeconds / 60);
      answer.kind = LogRead::Kind::Forbidden;
      break;  // the others wait for the window's end too
    } else if (read.error().isNotFound()) {
      answer.kind = LogRead::Kind::Gone;
    } else {
      kLog.warn({{"pod", ns + "/" + name}, {"container", ask.container}},
                "the container's log could not be read (tried again later): {}", read.error().message);
      answer.kind = LogRead::Kind::Failed;
    }
  }
  return reads;
}

std::optional<json> PodReconciler::readShmUsage(const json& pod) {
  const json& meta = member(pod, "metadata");
  const std::string ns = stringMember(meta, "namespace");
  const std::string name = stringMember(meta, "name");
  auto read = api_.getShmUsage(ns, name);
  if (read) return std::move(*read);
  // None: podshaper-shm does not watch the pod (or is not installed). Any other failure is
  // told as none too: the Event then says less.
  if (!read.error().isNotFound()) {
    if (!shmUsageFailureLogged_.exchange(true)) {
      kLog.info({{"pod", ns + "/" + name}},
                "the pod's ShmUsage could not be read ({}): ShmExhausted Events say nothing of what podshaper-shm "
                "measured while it cannot; grant the operator get on shmusages.podshaper.io (later failures are "
                "logged at debug)",
                read.error().message);
    } else {
      kLog.debug({{"pod", ns + "/" + name}}, "the pod's ShmUsage could not be read: {}", read.error().message);
    }
  }
  return std::nullopt;
}

metrics::Counter& PodReconciler::podEvents(std::string_view reason, std::string_view cause) {
  return metrics_.counter("podshaper_operator_pod_events_total",
                          "Events that explain a shaped pod, by reason (NotPlaceable, ShmExhausted, RejectedByKubelet) "
                          "and cause.",
                          {{"reason", std::string(reason)}, {"cause", std::string(cause)}});
}

Reconciler::Result PodReconciler::reconcile(const std::string& key, const std::optional<json>& pod,
                                            const std::function<std::shared_ptr<const std::vector<NodeFacts>>()>& nodes) {
  using Outcome = Reconciler::Outcome;
  if (!pod) {
    std::lock_guard lock(mu_);
    memories_.forget(key);
    return {Outcome::Done, std::nullopt};
  }
  if (!mayWrite_()) return {Outcome::NotLeader, std::nullopt};
  const std::string uid = stringMember(member(*pod, "metadata"), "uid");
  const auto owner = controllerOf(*pod);
  cli::LogObject about(key, owner ? owner->kind + " " + owner->name : "");
  const long long now = clock_.wallMicros() / 1000000;
  ToldState told;
  {
    std::lock_guard lock(mu_);
    told = memories_.look(key, uid, owner ? owner->uid : "");
  }

  const PodAsks asks = podAsks(*pod, told, now, options_.pendingGrace.count());
  const auto reads = readLogs(*pod, asks.logs);
  const auto facts = asks.nodes ? nodes() : nullptr;
  const std::optional<json> shmUsage = asks.shmUsage ? readShmUsage(*pod) : std::nullopt;
  const PodPlan plan = planPod({.pod = &*pod,
                                .told = &told,
                                .asks = &asks,
                                .reads = &reads,
                                .nodes = facts.get(),
                                .shmUsage = shmUsage ? &*shmUsage : nullptr,
                                .now = now,
                                .graceSeconds = options_.pendingGrace.count()});

  bool failed = plan.readFailed;
  std::vector<bool> toldNow(plan.tells.size(), false);
  for (std::size_t i = 0; i < plan.tells.size(); ++i) {
    const PodTell& t = plan.tells[i];
    if ((t.after && !toldNow[*t.after]) || std::ranges::any_of(t.unless, [&](std::size_t j) { return toldNow[j]; })) {
      continue;
    }
    if (!tell(t)) {
      failed = true;  // told on the next look
      continue;
    }
    toldNow[i] = true;
    if (t.cause.empty()) continue;  // the controller's
    podEvents(t.event.reason, t.cause).inc();
    if (t.container.empty()) {
      kLog.info({{"pod", key}}, "{} ({})", t.event.reason, t.cause);
    } else {
      kLog.info({{"pod", key}, {"container", t.container}}, "{} ({})", t.event.reason, t.cause);
    }
  }
  {
    std::lock_guard lock(mu_);
    memories_.learn(key, uid, plan.learnt);
    for (std::size_t i = 0; i < plan.tells.size(); ++i) {
      if (toldNow[i]) memories_.remember(key, uid, plan.tells[i].remember);
    }
  }
  if (failed) return {Outcome::Retry, std::nullopt};
  if (plan.lookAgainAfter) return {Outcome::Done, std::chrono::seconds(*plan.lookAgainAfter)};
  return {Outcome::Done, std::nullopt};
}

}  // namespace podshaper::op
