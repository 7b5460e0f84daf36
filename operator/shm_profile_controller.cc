#include "operator/shm_profile_controller.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "base/json_util.h"
#include "cli/logging.h"
#include "judging/shm_profile_plan.h"
#include "operator/writes.h"

namespace podshaper::op {

namespace {
const cli::Logger& kLog = cli::logger("shm-profile");
}  // namespace

using nlohmann::json;

ShmProfileController::ShmProfileController(const Cache& pods, const Cache& shmUsages, const Cache& profiles,
                                           ReconcileApi& api, const Clock& clock, metrics::Registry& metrics,
                                           std::function<bool()> mayWrite, ProfileSettings settings,
                                           RunnerOptions runner)
    : pods_(pods),
      shmUsages_(shmUsages),
      profiles_(profiles),
      api_(api),
      clock_(clock),
      mayWrite_(std::move(mayWrite)),
      settings_(settings),
      writes_(writesTotal(metrics, WriteKind::kShmProfile)),
      conflicts_(conflictsTotal(metrics)),
      runner_(std::move(runner), metrics, [this](const std::string& key) { return reconcile(key); }) {}

std::vector<std::string> ShmProfileController::reindex(const std::string& podKey) {
  std::string profile;
  if (auto pod = pods_.get(podKey)) {
    if (auto profiled = profiledPod(*pod)) {
      profile = stringMember(member(*pod, "metadata"), "namespace") + "/" + profiled->profile;
    }
  }
  std::vector<std::string> touched;
  std::lock_guard lock(mu_);
  if (auto was = profileOfPod_.find(podKey); was != profileOfPod_.end()) {
    touched.push_back(was->second);
    if (was->second != profile) {
      auto pods = podsOfProfile_.find(was->second);
      pods->second.erase(podKey);
      if (pods->second.empty()) podsOfProfile_.erase(pods);
      profileOfPod_.erase(was);
    }
  }
  if (!profile.empty()) {
    profileOfPod_[podKey] = profile;
    podsOfProfile_[profile].insert(podKey);
    if (touched.empty() || touched.front() != profile) touched.push_back(profile);
  }
  return touched;
}

std::vector<std::string> ShmProfileController::podsOf(const std::string& profileKey) {
  std::lock_guard lock(mu_);
  auto it = podsOfProfile_.find(profileKey);
  if (it == podsOfProfile_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

void ShmProfileController::podsChanged(const std::vector<std::string>& keys) {
  // A pod gone is looked at too: nothing of it is lost (the profile keeps its runs), and
  // its profile's next expiry is queued again.
  for (const auto& key : keys) {
    for (const auto& profile : reindex(key)) runner_.add(profile);
  }
}

void ShmProfileController::shmUsagesChanged(const std::vector<std::string>& keys) {
  std::vector<std::string> profiles;
  {
    std::lock_guard lock(mu_);
    for (const auto& key : keys) {
      if (auto it = profileOfPod_.find(key); it != profileOfPod_.end()) profiles.push_back(it->second);
    }
  }
  for (const auto& profile : profiles) runner_.add(profile);
}

void ShmProfileController::profilesChanged(const std::vector<std::string>& keys) {
  for (const auto& key : keys) runner_.add(key);
}

void ShmProfileController::enqueueAll() {
  // The profiles that exist, whether or not a pod of theirs is left: each still expires.
  const auto existing = profiles_.keys();
  std::set<std::string> profiles(existing.begin(), existing.end());
  const auto keys = pods_.keys();
  std::set<std::string> gone;
  {
    std::lock_guard lock(mu_);
    for (const auto& [pod, profile] : profileOfPod_) gone.insert(pod);
  }
  for (const auto& key : keys) {
    gone.erase(key);
    for (auto& profile : reindex(key)) profiles.insert(std::move(profile));
  }
  for (const auto& key : gone) {
    for (auto& profile : reindex(key)) profiles.insert(std::move(profile));
  }
  for (const auto& profile : profiles) runner_.add(profile);
}

Reconciler::Result ShmProfileController::reconcile(const std::string& key) {
  if (!mayWrite_()) return {Reconciler::Outcome::NotLeader, std::nullopt};
  const std::size_t slash = key.find('/');
  if (slash == std::string::npos) return {};
  const std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
  cli::LogObject about(key);

  // The pods and ShmUsages as the caches hold them now: the plan reads them by pointer.
  std::vector<std::pair<json, std::optional<json>>> read;
  for (const auto& podKey : podsOf(key)) {
    if (auto pod = pods_.get(podKey)) read.emplace_back(std::move(*pod), shmUsages_.get(podKey));
  }
  ShmProfileInputs in{.namespaceName = ns,
                      .name = name,
                      .existing = nullptr,
                      .pods = {},
                      .now = clock_.wallMicros() / 1000000,
                      .settings = settings_};
  for (const auto& [pod, usage] : read) in.pods.push_back({&pod, usage ? &*usage : nullptr});
  auto existing = api_.getShmProfile(ns, name);
  if (!existing && !existing.error().isNotFound()) {
    kLog.warn({{"shmprofile", key}}, "not read (tried again): {}", existing.error().message);
    return {Reconciler::Outcome::Retry, std::nullopt};
  }
  if (existing) in.existing = &*existing;
  const ShmProfilePlan plan = planShmProfile(in);
  if (!plan.unreadable.empty()) {
    kLog.warn({{"shmprofile", key}}, "its status does not read ({}): made again from its pods' runs", plan.unreadable);
  }

  auto recommended = [&plan] { return stringMember(member(plan.status, "recommendation"), "message"); };
  switch (plan.write) {
    case ProfileWrite::kNone: break;
    case ProfileWrite::kCreate: {
      auto created = api_.createShmProfile(ns, plan.object);
      if (!created) return {writeFailed(plan.write, key, created.error()), std::nullopt};
      writes_.inc();
      json object = std::move(*created);
      object["status"] = plan.status;
      if (auto put = api_.putShmProfileStatus(ns, name, object); !put) {
        return {writeFailed(ProfileWrite::kStatus, key, put.error()), std::nullopt};
      }
      writes_.inc();
      kLog.info({{"shmprofile", key}, {"runs", plan.runs.size()}}, "made: {}", recommended());
      break;
    }
    case ProfileWrite::kStatus:
      if (auto put = api_.putShmProfileStatus(ns, name, plan.object); !put) {
        return {writeFailed(plan.write, key, put.error()), std::nullopt};
      }
      writes_.inc();
      kLog.info({{"shmprofile", key}, {"runs", plan.runs.size()}}, "status written: {}", recommended());
      break;
    case ProfileWrite::kDelete:
      if (auto deleted = api_.deleteShmProfile(ns, name, plan.resourceVersion); !deleted) {
        if (deleted.error().isNotFound()) break;
        return {writeFailed(plan.write, key, deleted.error()), std::nullopt};
      }
      writes_.inc();
      kLog.info({{"shmprofile", key}}, "deleted: no run of its workload ended within {} h", settings_.maxAgeSeconds / 3600);
      break;
  }
  if (!plan.lookAgainAt) return {Reconciler::Outcome::Done, std::nullopt};
  return {Reconciler::Outcome::Done, std::chrono::seconds(std::max<int64_t>(*plan.lookAgainAt - in.now, 1))};
}

Reconciler::Outcome ShmProfileController::writeFailed(ProfileWrite write, const std::string& key,
                                                      const kube::ApiError& error) {
  const char* what = write == ProfileWrite::kCreate   ? "not made"
                     : write == ProfileWrite::kDelete ? "not deleted"
                                                      : "status not written";
  // A create's 404 is of the resource: no ShmProfile CRD. Any other is of the profile.
  if (error.isConflict() || (error.isNotFound() && write != ProfileWrite::kCreate)) {
    // Changed or gone since read (409; 404 of a status or a delete): read again.
    conflicts_.inc();
    kLog.info({{"shmprofile", key}}, "{}: changed since read; looking again ({})", what, error.message);
    return Reconciler::Outcome::Retry;
  }
  if (error.isForbidden() || error.isNotFound()) {
    // Not allowed, or no ShmProfile CRD: nothing a retry mends; the next change looks again.
    if (!refusedTold_.exchange(true)) {
      kLog.warn({{"shmprofile", key}},
                "{}: {} (are the ShmProfile CRD and the operator's RBAC for shmprofiles this version's? kubectl apply "
                "-k crds/); said once",
                what, error.message);
    }
    return Reconciler::Outcome::Done;
  }
  kLog.warn({{"shmprofile", key}}, "{} (tried again): {}", what, error.message);
  return Reconciler::Outcome::Retry;
}

}  // namespace podshaper::op
