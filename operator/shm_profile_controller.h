#pragma once

// The workloads' ShmProfiles (docs/operator.md "ShmProfiles: sizing from measured use"): a
// key per profile, "namespace/name", queued when one of its pods (those whose
// podshaper.io/shm-profile names it) or one of their ShmUsages changes, when the profile
// comes or goes, and when a run it keeps expires. Its reconcile reads the profile, asks
// judging/shm_profile_plan.h what to write, and writes that, only while `mayWrite()` (the
// leader) holds.

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "api/shm_profile.h"
#include "judging/shm_profile_plan.h"
#include "kube/api_result.h"
#include "metrics/metrics.h"
#include "operator/caches.h"
#include "operator/reconciler.h"
#include "operator/runner.h"

namespace podshaper::op {

class ShmProfileController {
 public:
  // `pods`: the shaped pods; `shmUsages`: podshaper-shm's ShmUsages, each named after its
  // pod; `profiles`: the ShmProfiles that exist (their names).
  ShmProfileController(const Cache& pods, const Cache& shmUsages, const Cache& profiles, ReconcileApi& api,
                       const Clock& clock, metrics::Registry& metrics, std::function<bool()> mayWrite,
                       ProfileSettings settings, RunnerOptions runner);

  // Shaped pods changed (store keys, "namespace/name"): their profiles are looked at.
  void podsChanged(const std::vector<std::string>& keys);
  // ShmUsages changed: their keys are their pods'.
  void shmUsagesChanged(const std::vector<std::string>& keys);
  // ShmProfiles came or went (their keys).
  void profilesChanged(const std::vector<std::string>& keys);
  // Every profile, and the profile of every pod in the cache, its pods found again.
  void enqueueAll();
  Runner& runner() { return runner_; }

 private:
  Reconciler::Result reconcile(const std::string& key);
  // Pod `podKey`'s profile as the cache has it now, put in the index; the profiles it was
  // and is in (none, one, or two where it changed).
  std::vector<std::string> reindex(const std::string& podKey);
  std::vector<std::string> podsOf(const std::string& profileKey);
  // Why a write was refused, said; what the queue does next.
  Reconciler::Outcome writeFailed(ProfileWrite write, const std::string& key, const kube::ApiError& error);

  const Cache& pods_;
  const Cache& shmUsages_;
  const Cache& profiles_;
  ReconcileApi& api_;
  const Clock& clock_;
  const std::function<bool()> mayWrite_;
  const ProfileSettings settings_;

  // Which pods each profile has, kept as the pods change: a reconcile reads its own pods,
  // not the whole cache.
  std::mutex mu_;                                               // guards the two maps
  std::map<std::string, std::string> profileOfPod_;             // pod key → profile key
  std::map<std::string, std::set<std::string>> podsOfProfile_;  // profile key → pod keys
  std::atomic<bool> refusedTold_ = false;  // a 403 (no RBAC) or 404 (no CRD) is logged once at warn

  metrics::Counter &writes_, &conflicts_;
  Runner runner_;  // last: its workers stop before the rest goes
};

}  // namespace podshaper::op
