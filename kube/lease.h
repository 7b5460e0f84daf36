#pragma once

// Leader election over a coordination.k8s.io/v1 Lease, as pure decisions (the
// rules of client-go's leaderelection package). No I/O and no clocks: the
// caller passes two times, and they are never compared with each other:
//   - local monotonic micros (steady clock): when this candidate saw the lease
//     change, and now. Expiry is judged only on this clock, because the clocks
//     of two machines may disagree by more than a lease lasts;
//   - wall-clock micros since the epoch: written into acquireTime/renewTime for
//     people to read (`kubectl get lease -o yaml`), never used to decide.
// LeaderElector (leader_elector.h) does the I/O.

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "base/result.h"

namespace podshaper::kube {

struct LeaseConfig {
  std::string ns;        // namespace of the Lease
  std::string name;      // name of the Lease
  std::string identity;  // this candidate; unique per process (e.g. pod name + random suffix)
  // How long others wait, after they last saw the holder renew, before taking over.
  std::chrono::seconds leaseDuration{15};
  // The leader stops believing it leads when it has not renewed for this long;
  // shorter than leaseDuration, so it stops before anyone else can start.
  std::chrono::seconds renewDeadline{10};
  // How often each candidate tries to acquire or renew.
  std::chrono::seconds retryPeriod{2};
};

// leaseDuration > renewDeadline > retryPeriod > 0 and the names non-empty;
// the error says which rule and the values.
Result<void> validate(const LeaseConfig& config);

// The spec of a Lease (and the resourceVersion it was read at).
struct LeaseRecord {
  std::string holderIdentity;  // empty: the lease is free
  long long leaseDurationSeconds = 0;
  std::optional<long long> acquireTimeMicros;  // the writer's wall clock: for people only
  std::optional<long long> renewTimeMicros;    // the writer's wall clock: for people, and to notice renewals
  long long leaseTransitions = 0;
  std::string resourceVersion;  // empty: not read from the server

  bool operator==(const LeaseRecord&) const = default;
};

// Tolerant: a missing field reads as empty/0/nullopt, a time that does not parse
// as nullopt (a lease is still usable when someone wrote it badly).
LeaseRecord leaseRecordFromJson(const nlohmann::json& lease);

// The Lease object to create (POST) or replace (PUT): metadata.resourceVersion
// is set when the record has one, which makes the PUT conditional (409 when
// the lease changed since it was read). Times absent from the record are left out.
nlohmann::json leaseToJson(const LeaseConfig& config, const LeaseRecord& record);

// The Lease collection of config.ns, and the Lease itself.
std::string leasesPath(const LeaseConfig& config);
std::string leasePath(const LeaseConfig& config);

// What this candidate knows of the lease, on its own clock.
struct LeaseObservation {
  LeaseRecord record;
  long long observedAtMicros = 0;  // local monotonic time at which holder or renewTime last changed
};

// Folds a freshly read record into what was known: observedAtMicros moves to
// now on the first read and whenever the holder or renewTime changed (a holder
// that renews keeps its lease alive); other changes (resourceVersion alone, a
// label edit) do not extend the lease.
LeaseObservation observeLease(const std::optional<LeaseObservation>& previous, LeaseRecord current,
                              long long nowMicros);

enum class LeaseAction {
  Acquire,  // write: the lease is free, or its holder stopped renewing long enough ago
  Renew,    // write: we hold it
  Wait,     // another holder that has renewed within its leaseDuration, as we saw it
};
const char* toString(LeaseAction action);

struct LeaseDecision {
  LeaseAction action = LeaseAction::Wait;
  // Acquire/Renew: the record to write, with the observed resourceVersion as
  // the precondition. Wait: the observed record.
  LeaseRecord record;
  // Wait: the local monotonic time at which the holder's lease runs out unless
  // we see it renew before then.
  long long expiresAtMicros = 0;
};

// The decision of one try. The holder's leaseDurationSeconds counts (it may
// differ from ours); when the record has none, config.leaseDuration does.
// Taking over (Acquire) sets acquireTime and adds one to leaseTransitions;
// renewing keeps both. A renewal of our own record is a Renew even when it
// would look expired to others: nobody else took it, so nothing changed hands.
LeaseDecision decideLease(const LeaseConfig& config, const LeaseObservation& observed, long long nowMonotonicMicros,
                          long long nowWallMicros);

// The record to create when the Lease does not exist yet (no transitions so far).
LeaseRecord newLeaseRecord(const LeaseConfig& config, long long nowWallMicros);

// What the leader writes on a clean stop (client-go's ReleaseOnCancel): no
// holder, so a standby takes over at its next try instead of waiting out the
// lease; leaseDurationSeconds 1 for readers that check the time anyway.
// Transitions and acquireTime are kept; the resourceVersion stays the precondition.
LeaseRecord releasedLeaseRecord(const LeaseRecord& held, long long nowWallMicros);

}  // namespace podshaper::kube
