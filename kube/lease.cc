#include "kube/lease.h"

#include <limits>
#include <utility>

#include "base/json_util.h"
#include "base/timefmt.h"
#include "kube/protocol.h"

namespace podshaper::kube {
namespace {

constexpr long long kMicrosPerSecond = 1'000'000;

std::string seconds(std::chrono::seconds s) { return std::to_string(s.count()) + "s"; }

// The lease is written by anyone with RBAC on it: read what is there without
// throwing on a wrong type.
long long integerField(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return 0;
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<long long>() : 0;
}

std::optional<long long> timeField(const nlohmann::json& object, const char* key) {
  const std::string text = stringMember(object, key);
  if (text.empty()) return std::nullopt;
  return parseTimeMicros(text);
}

// observedAt + duration without overflow: a lease written with an absurd
// duration must not wrap around to "long expired".
long long expiry(long long observedAtMicros, long long durationSeconds) {
  constexpr long long kMax = std::numeric_limits<long long>::max();
  const long long durationMicros =
      durationSeconds > kMax / kMicrosPerSecond ? kMax : durationSeconds * kMicrosPerSecond;
  return observedAtMicros > kMax - durationMicros ? kMax : observedAtMicros + durationMicros;
}

}  // namespace

Result<void> validate(const LeaseConfig& c) {
  if (c.ns.empty()) return makeError("lease: namespace is empty");
  if (c.name.empty()) return makeError("lease: name is empty");
  if (c.identity.empty()) {
    return makeError("lease " + c.ns + "/" + c.name +
                     ": identity is empty; use something unique to this process, such as the pod name");
  }
  const std::string where = "lease " + c.ns + "/" + c.name + ": ";
  if (c.retryPeriod.count() <= 0) {
    return makeError(where + "retryPeriod must be positive, not " + seconds(c.retryPeriod));
  }
  if (c.renewDeadline <= c.retryPeriod) {
    return makeError(where + "renewDeadline (" + seconds(c.renewDeadline) + ") must be longer than retryPeriod (" +
                     seconds(c.retryPeriod) + "), or the leader gives up before its second try");
  }
  if (c.leaseDuration <= c.renewDeadline) {
    return makeError(where + "leaseDuration (" + seconds(c.leaseDuration) + ") must be longer than renewDeadline (" +
                     seconds(c.renewDeadline) + "), so that a leader stops before another may take over");
  }
  return {};
}

LeaseRecord leaseRecordFromJson(const nlohmann::json& lease) {
  LeaseRecord r;
  if (!lease.is_object()) return r;
  if (auto metadata = lease.find("metadata"); metadata != lease.end()) {
    r.resourceVersion = stringMember(*metadata, "resourceVersion");
  }
  if (auto spec = lease.find("spec"); spec != lease.end()) {
    r.holderIdentity = stringMember(*spec, "holderIdentity");
    r.leaseDurationSeconds = integerField(*spec, "leaseDurationSeconds");
    r.acquireTimeMicros = timeField(*spec, "acquireTime");
    r.renewTimeMicros = timeField(*spec, "renewTime");
    r.leaseTransitions = integerField(*spec, "leaseTransitions");
  }
  return r;
}

nlohmann::json leaseToJson(const LeaseConfig& config, const LeaseRecord& record) {
  nlohmann::json metadata = {{"name", config.name}, {"namespace", config.ns}};
  if (!record.resourceVersion.empty()) metadata["resourceVersion"] = record.resourceVersion;
  // holderIdentity is written even when empty: that is how a release frees the lease.
  nlohmann::json spec = {{"holderIdentity", record.holderIdentity},
                         {"leaseDurationSeconds", record.leaseDurationSeconds},
                         {"leaseTransitions", record.leaseTransitions}};
  if (record.acquireTimeMicros) spec["acquireTime"] = formatMicroTime(*record.acquireTimeMicros);
  if (record.renewTimeMicros) spec["renewTime"] = formatMicroTime(*record.renewTimeMicros);
  return {{"apiVersion", "coordination.k8s.io/v1"}, {"kind", "Lease"}, {"metadata", metadata}, {"spec", spec}};
}

std::string leasesPath(const LeaseConfig& config) {
  return resourcePath("coordination.k8s.io/v1", "leases", config.ns);
}

std::string leasePath(const LeaseConfig& config) {
  return resourcePath("coordination.k8s.io/v1", "leases", config.ns, config.name);
}

LeaseObservation observeLease(const std::optional<LeaseObservation>& previous, LeaseRecord current,
                              long long nowMicros) {
  const bool changed = !previous || previous->record.holderIdentity != current.holderIdentity ||
                       previous->record.renewTimeMicros != current.renewTimeMicros;
  return {std::move(current), changed ? nowMicros : previous->observedAtMicros};
}

const char* toString(LeaseAction action) {
  switch (action) {
    case LeaseAction::Acquire: return "acquire";
    case LeaseAction::Renew: return "renew";
    case LeaseAction::Wait: return "wait";
  }
  return "unknown";
}

LeaseDecision decideLease(const LeaseConfig& config, const LeaseObservation& observed, long long nowMonotonicMicros,
                          long long nowWallMicros) {
  const LeaseRecord& old = observed.record;
  LeaseDecision d;

  if (!old.holderIdentity.empty() && old.holderIdentity != config.identity) {
    const long long duration = old.leaseDurationSeconds > 0 ? old.leaseDurationSeconds : config.leaseDuration.count();
    d.expiresAtMicros = expiry(observed.observedAtMicros, duration);
    if (d.expiresAtMicros > nowMonotonicMicros) {
      d.action = LeaseAction::Wait;
      d.record = old;
      return d;
    }
  }

  d.record = old;  // keeps resourceVersion (the precondition), acquireTime and transitions
  d.record.holderIdentity = config.identity;
  d.record.leaseDurationSeconds = config.leaseDuration.count();
  d.record.renewTimeMicros = nowWallMicros;
  if (old.holderIdentity == config.identity) {
    d.action = LeaseAction::Renew;
    // A record of ours without acquireTime (written by hand, or badly): say when we first renewed it.
    if (!d.record.acquireTimeMicros) d.record.acquireTimeMicros = nowWallMicros;
  } else {
    d.action = LeaseAction::Acquire;
    d.record.acquireTimeMicros = nowWallMicros;
    if (old.leaseTransitions < std::numeric_limits<long long>::max()) {
      d.record.leaseTransitions = old.leaseTransitions + 1;
    }
  }
  return d;
}

LeaseRecord newLeaseRecord(const LeaseConfig& config, long long nowWallMicros) {
  LeaseRecord r;
  r.holderIdentity = config.identity;
  r.leaseDurationSeconds = config.leaseDuration.count();
  r.acquireTimeMicros = nowWallMicros;
  r.renewTimeMicros = nowWallMicros;
  r.leaseTransitions = 0;
  return r;
}

LeaseRecord releasedLeaseRecord(const LeaseRecord& held, long long nowWallMicros) {
  LeaseRecord r = held;
  r.holderIdentity.clear();
  r.leaseDurationSeconds = 1;
  r.renewTimeMicros = nowWallMicros;
  return r;
}

}  // namespace podshaper::kube
