#include "api/shm_profile.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

#include "api/names.h"
#include "base/checked.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"
#include "base/timefmt.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

std::optional<std::string> text(const json& object, std::string_view key) {
  const json& v = member(object, key);
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) return std::nullopt;
  return v.get<std::string>();
}

bool lowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A DNS subdomain (RFC 1123), as object names are: lowercase letters, digits, '-' and '.',
// each part between dots starting and ending with a letter or digit.
bool isSubdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (lowerAlnum(c)) continue;
    if (c != '-' && c != '.') return false;
    if (i == 0 || i + 1 == name.size()) return false;
    if (c == '.' && !(lowerAlnum(name[i - 1]) && lowerAlnum(name[i + 1]))) return false;
  }
  return true;
}

uint32_t fnv1a(std::string_view data, uint32_t hash = 2166136261u) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

std::string hex32(uint32_t value) {
  char buffer[9];
  std::snprintf(buffer, sizeof buffer, "%08x", value);
  return buffer;
}

// Ends `name` where a part of a subdomain can end: not on '-' or '.'.
void endOnAlnum(std::string& name) {
  while (!name.empty() && !lowerAlnum(name.back())) name.pop_back();
}

}  // namespace

std::string withinLength(std::string name, std::size_t max) {
  if (name.size() <= max) return name;
  const std::string hash = hex32(fnv1a(name));
  name.resize(max - hash.size() - 1);
  endOnAlnum(name);
  return name + "-" + hash;
}

std::string profileName(std::string_view kind, std::string_view name) {
  std::string raw(kind);
  raw += '.';
  raw += name;
  std::string out;
  for (char c : raw) {
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == '/') l = '.';
    if (!lowerAlnum(l) && l != '.') l = '-';
    if (lowerAlnum(l)) {
      out += l;
    } else if (!out.empty() && out.back() != '.') {
      if (l == '.') endOnAlnum(out);
      if (!out.empty()) out += l;
    }
  }
  endOnAlnum(out);
  return withinLength(std::move(out), 253);
}

namespace {

Workload controllerWorkload(std::string kind, std::string name) {
  Workload w{std::move(kind), std::move(name), {}};
  w.profile = profileName(w.kind, w.name);
  return w;
}

// The pod's controller: its ownerReference with controller: true.
const json* controllerOf(const json& pod) {
  for (const json& ref : member(member(pod, "metadata"), "ownerReferences")) {
    if (member(ref, "controller") == true && member(ref, "kind").is_string() && member(ref, "name").is_string()) {
      return &ref;
    }
  }
  return nullptr;
}

// A CronJob names its Jobs "<cronjob>-<minutes since the epoch>".
std::optional<std::string> cronJobOf(std::string_view job) {
  const std::size_t dash = job.rfind('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  std::string_view suffix = job.substr(dash + 1);
  if (suffix.size() < 8 || suffix.size() > 10) return std::nullopt;
  if (!std::all_of(suffix.begin(), suffix.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return std::nullopt;
  }
  return std::string(job.substr(0, dash));
}

std::string ago(int64_t seconds) {
  if (seconds < 60) return std::to_string(std::max<int64_t>(seconds, 0)) + " s ago";
  if (seconds < 3600) return std::to_string(seconds / 60) + " min ago";
  if (seconds < 2 * 86400) return std::to_string(seconds / 3600) + " h ago";
  return std::to_string(seconds / 86400) + " d ago";
}

std::string mib(uint64_t bytes) {
  return formatBytes(static_cast<int64_t>(std::min<uint64_t>(ceilMiB(bytes), INT64_MAX / kMiB) * kMiB));
}

// A per-rank figure for `ranks` ranks. Each per-rank figure is rounded up, so `ranks` times
// it is up to ranks-1 bytes above the total it came from (a peak of 412Mi over 3 ranks is
// 144004437.3 bytes a rank, ×3 after rounding 412Mi + 2): the least total it stands for,
// which is the total measured whenever that was a whole number of pages (/dev/shm is
// counted in pages): it reads "412Mi", and + 20% of 5Mi is 6Mi, not 7Mi.
uint64_t totalFor(uint64_t perRank, uint64_t ranks) {
  ranks = std::max<uint64_t>(ranks, 1);
  if (perRank == 0) return 0;
  return checkedMul(perRank, ranks).value_or(UINT64_MAX / 2) - (ranks - 1);
}

}  // namespace

std::string Workload::words() const {
  if (kind.empty()) return "workload " + inQuotes(name) + " (" + std::string(names::kWorkload) + ")";
  const std::size_t slash = name.find('/');
  if (slash == std::string::npos) return kind + " " + name;
  const std::string group = name.substr(slash + 1);
  const std::string what = kind == "JobSet"                     ? "replicated job "
                           : kind == "RayCluster" || kind == "RayJob" ? "worker group "
                           : kind == "LeaderWorkerSet"          ? ""
                                                                : "replica type ";
  return kind + " " + name.substr(0, slash) + ", " + what + group;
}

Result<std::optional<Workload>> workloadOf(const json& pod) {
  const json& annotations = member(member(pod, "metadata"), "annotations");
  if (const json& named = member(annotations, names::kWorkload); !named.is_null()) {
    const std::string value = named.is_string() ? named.get<std::string>() : named.dump();
    if (!isSubdomain(value)) {
      return makeError(std::string(names::kWorkload) + " " + inQuotes(value) +
                       " is not a name a ShmProfile can have: lowercase letters, digits, '-' and '.', "
                       "starting and ending with a letter or digit, at most 253");
    }
    return std::optional(Workload{"", value, value});
  }
  // A Job named as a CronJob's run is one run of the CronJob: its runs share a profile.
  auto w = controllerWorkloadOf(pod);
  if (w && w->kind == "Job") {
    if (auto cronJob = cronJobOf(w->name)) return std::optional(controllerWorkload("CronJob", *cronJob));
  }
  return w;
}

std::optional<Workload> controllerWorkloadOf(const json& pod) {
  const json& labels = labelsOf(pod);
  if (auto jobSet = text(labels, "jobset.sigs.k8s.io/jobset-name")) {
    auto replicated = text(labels, "jobset.sigs.k8s.io/replicatedjob-name");
    return controllerWorkload("JobSet", *jobSet + (replicated ? "/" + *replicated : ""));
  }
  if (auto lws = text(labels, "leaderworkerset.sigs.k8s.io/name")) {
    auto index = text(labels, "leaderworkerset.sigs.k8s.io/worker-index");
    return controllerWorkload("LeaderWorkerSet", *lws + (index == "0" ? "/leader" : "/worker"));
  }
  if (auto cluster = text(labels, "ray.io/cluster")) {
    // KubeRay labels a RayJob's RayCluster ray.io/originated-from-*, not the cluster's pods
    // (ray-operator utils/constant.go): a RayJob's pod is known by its cluster,
    // "<rayjob>-<5 random>", unless the group's pod template carries them.
    auto group = text(labels, "ray.io/group");
    auto rayJob = text(labels, "ray.io/originated-from-crd") == "RayJob" ? text(labels, "ray.io/originated-from-cr-name")
                                                                         : std::nullopt;
    return controllerWorkload(rayJob ? "RayJob" : "RayCluster", (rayJob ? *rayJob : *cluster) + (group ? "/" + *group : ""));
  }
  const json* owner = controllerOf(pod);
  if (auto job = text(labels, "training.kubeflow.org/job-name")) {
    // training-operator v1 labels the replica type, mpi-operator v2 the role alone
    // ("launcher", "worker"); mpi-operator's launcher is a batch Job's pod.
    auto type = text(labels, "training.kubeflow.org/replica-type");
    if (!type) type = text(labels, "training.kubeflow.org/job-role");
    const std::string kind = owner != nullptr && member(*owner, "kind") != "Job"
                                 ? member(*owner, "kind").get<std::string>()
                             : text(labels, "training.kubeflow.org/operator-name") == "mpi-operator"
                                 ? std::string("MPIJob")
                                 : std::string("KubeflowJob");
    return controllerWorkload(kind, *job + (type ? "/" + *type : ""));
  }
  if (owner == nullptr) return std::nullopt;
  const std::string kind = member(*owner, "kind").get<std::string>();
  const std::string name = member(*owner, "name").get<std::string>();
  if (kind == "ReplicaSet") {
    if (auto hash = text(labels, "pod-template-hash"); hash && name.size() > hash->size() + 1 &&
                                                       name.ends_with("-" + *hash)) {
      return controllerWorkload("Deployment", name.substr(0, name.size() - hash->size() - 1));
    }
  }
  return controllerWorkload(kind, name);
}

std::string declaredInputs(const json& pod) {
  const json& annotations = member(member(pod, "metadata"), "annotations");
  uint32_t hash = fnv1a("");
  for (std::string_view key : {names::kWorkers, names::kPrefetchFactor, names::kBatchBytes, names::kBatchShape,
                               names::kBatchDtype, names::kNcclCommunicators}) {
    const json& v = member(annotations, key);
    if (v.is_null()) continue;
    hash = fnv1a(key, hash);
    hash = fnv1a("=", hash);
    hash = fnv1a(v.is_string() ? v.get_ref<const std::string&>() : v.dump(), hash);
    hash = fnv1a("\n", hash);
  }
  return hex32(hash);
}

std::string ProfiledPod::annotation() const {
  return profile + "; ranks=" + std::to_string(ranks) + "; inputs=" + inputs;
}

std::optional<ProfiledPod> parseProfiledPod(std::string_view annotation) {
  ProfiledPod out;
  std::size_t start = 0;
  bool first = true;
  while (start <= annotation.size()) {
    std::size_t end = annotation.find(';', start);
    if (end == std::string_view::npos) end = annotation.size();
    std::string_view part = annotation.substr(start, end - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (first) {
      if (!isSubdomain(part)) return std::nullopt;
      out.profile = std::string(part);
      first = false;
    } else if (part.starts_with("ranks=")) {
      auto ranks = parseCount(part.substr(6));
      if (!ranks || *ranks == 0) return std::nullopt;
      out.ranks = *ranks;
    } else if (part.starts_with("inputs=")) {
      out.inputs = std::string(part.substr(7));
    } else {
      return std::nullopt;
    }
    start = end + 1;
  }
  if (out.ranks == 0 || out.inputs.empty()) return std::nullopt;
  return out;
}

const char* toString(RunEnd end) {
  switch (end) {
    case RunEnd::kCompleted: return "Completed";
    case RunEnd::kFailed: return "Failed";
    case RunEnd::kShmExhausted: return "ShmExhausted";
    case RunEnd::kEnded: return "Ended";
  }
  return "Ended";
}

std::optional<RunEnd> parseRunEnd(std::string_view text) {
  for (RunEnd end : {RunEnd::kCompleted, RunEnd::kFailed, RunEnd::kShmExhausted, RunEnd::kEnded}) {
    if (text == toString(end)) return end;
  }
  return std::nullopt;
}

uint64_t ProfileRun::needBytes() const {
  if (end != RunEnd::kShmExhausted) return peakBytes;
  return std::max(peakBytes, checkedMul(sizeBytes, kDeathFactor).value_or(sizeBytes));
}

json ProfileRun::toJson() const {
  return json{{"pod", pod},           {"podUID", podUID},       {"run", run},
              {"endedAt", formatTime(endedAt)}, {"ranks", ranks}, {"sizeBytes", sizeBytes},
              {"peakBytes", peakBytes}, {"end", toString(end)}, {"inputs", inputs}};
}

uint64_t Recommendation::bytesFor(uint64_t ranks, uint64_t floorBytes) const {
  const uint64_t need = totalFor(needPerRank, ranks);
  const uint64_t with = mulDivCeil(need, 100 + headroomPercent, 100).value_or(need);
  return std::max(floorBytes, std::min<uint64_t>(ceilMiB(with), UINT64_MAX / kMiB / 2) * kMiB);
}

std::string Recommendation::words(uint64_t ranks, uint64_t bytes, std::optional<int64_t> now) const {
  const uint64_t need = totalFor(needPerRank, ranks);
  const bool died = deaths > 0 && needPerRank > peakPerRank;
  std::string out = (died ? "need " : "peak ") + mib(need) + (ranks == 1 ? " per rank" : " per " + counted(ranks, "rank")) +
                    " over " + counted(runs, "run") +
                    (now ? ", the last " + ago(*now - lastEndedAt) : ", the last ended " + formatTime(lastEndedAt));
  if (deaths > 0) {
    out += " (" + std::string(deaths == 1 ? "1 died" : std::to_string(deaths) + " died") +
           " of a full /dev/shm, counted as needing " + std::to_string(kDeathFactor) + "× its size)";
  }
  if (varies()) {
    out += "; the runs vary from " + mib(totalFor(lowestPerRank, ranks)) +
           " to " + mib(need) + ", more than " + std::to_string(kVariesFactor) + "×: the highest is used";
  }
  out += ", + " + std::to_string(headroomPercent) + "% = " + formatBytes(static_cast<int64_t>(bytes));
  return out;
}

std::optional<Recommendation> recommend(const std::vector<ProfileRun>& runs, std::string_view inputs, int64_t now,
                                        const ProfileSettings& settings) {
  if (runs.empty()) return std::nullopt;
  Recommendation r;
  r.inputs = inputs.empty() ? runs.back().inputs : std::string(inputs);
  r.headroomPercent = settings.headroomPercent;
  auto counts = [&](const ProfileRun& run) {
    return run.inputs == r.inputs && run.ranks != 0 && now - run.endedAt <= settings.maxAgeSeconds;
  };
  // A death's doubled size is a guess, kept until a later run, not a death, peaks above
  // that size (per rank): that run's measured peak says more, and the death is left out.
  auto measuredPast = [&](const ProfileRun& death) {
    return std::any_of(runs.begin(), runs.end(), [&](const ProfileRun& later) {
      return counts(later) && later.end != RunEnd::kShmExhausted && later.endedAt > death.endedAt &&
             later.peakBytes / later.ranks >= death.sizeBytes / death.ranks;
    });
  };
  for (const ProfileRun& run : runs) {
    if (!counts(run)) continue;
    const bool death = run.end == RunEnd::kShmExhausted;
    if (death && measuredPast(run)) continue;
    const uint64_t need = run.needBytes();
    const uint64_t perRank = mulDivCeil(need, 1, run.ranks).value_or(need);
    const uint64_t peakPerRank = mulDivCeil(run.peakBytes, 1, run.ranks).value_or(run.peakBytes);
    r.needPerRank = std::max(r.needPerRank, perRank);
    // A spread of deaths is the doubling at work, not an outlier: only measured needs vary.
    if (!death) r.lowestPerRank = r.lowestPerRank == 0 ? perRank : std::min(r.lowestPerRank, perRank);
    r.peakPerRank = std::max(r.peakPerRank, peakPerRank);
    r.lastEndedAt = std::max(r.lastEndedAt, run.endedAt);
    r.deaths += death ? 1 : 0;
    ++r.runs;
  }
  if (r.runs == 0 || r.needPerRank == 0) return std::nullopt;
  return r;
}

namespace {

Result<uint64_t> count(const json& object, std::string_view key, std::string_view where) {
  const json& v = member(object, key);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return makeError(std::string(where) + "." + std::string(key) + " is not a count");
}

Result<ProfileRun> readRun(const json& run, std::size_t i) {
  const std::string where = "status.runs[" + std::to_string(i) + "]";
  if (!run.is_object()) return makeError(where + " is not an object");
  ProfileRun out;
  // The pod's name and uid are for people (the webhook's watch does not keep them).
  auto ended = text(run, "endedAt");
  auto end = text(run, "end");
  auto inputs = text(run, "inputs");
  if (!ended || !end || !inputs) return makeError(where + " lacks endedAt, end or inputs");
  auto endedAt = parseTime(*ended);
  if (!endedAt) return makeError(where + ".endedAt " + inQuotes(*ended) + " is not a time");
  auto how = parseRunEnd(*end);
  if (!how) return makeError(where + ".end " + inQuotes(*end) + " is not Completed, Failed, ShmExhausted or Ended");
  auto number = count(run, "run", where);
  auto ranks = count(run, "ranks", where);
  auto size = count(run, "sizeBytes", where);
  auto peak = count(run, "peakBytes", where);
  for (const auto* r : {&number, &ranks, &size, &peak}) {
    if (!*r) return r->error();
  }
  if (*ranks == 0 || *ranks > 1'000'000) return makeError(where + ".ranks is not between 1 and 1000000");
  constexpr uint64_t kMaxBytes = 1ULL << 50;  // 1 PiB: no node has that
  if (*size == 0 || *size > kMaxBytes) return makeError(where + ".sizeBytes is not between 1 and 1Pi");
  if (*peak > *size) return makeError(where + ".peakBytes is above its sizeBytes: a /dev/shm holds no more than its size");
  out.pod = text(run, "pod").value_or("");
  out.podUID = text(run, "podUID").value_or("");
  out.run = static_cast<int64_t>(std::min<uint64_t>(*number, INT64_MAX));
  out.endedAt = *endedAt;
  out.ranks = *ranks;
  out.sizeBytes = *size;
  out.peakBytes = *peak;
  out.end = *how;
  out.inputs = *inputs;
  return out;
}

}  // namespace

Result<ShmProfile> readShmProfile(const json& object) {
  ShmProfile out;
  const json& metadata = member(object, "metadata");
  auto name = text(metadata, "name");
  auto ns = text(metadata, "namespace");
  if (!name || !ns) return makeError("metadata lacks name or namespace");
  out.name = *name;
  out.namespaceName = *ns;
  out.workload = text(member(object, "spec"), "workload").value_or("");
  const json& status = member(object, "status");
  const json& runs = member(status, "runs");
  if (!runs.is_array()) return makeError(runs.is_null() ? "status.runs is missing" : "status.runs is not a list");
  if (runs.empty()) return makeError("status.runs is empty");
  if (runs.size() > 1000) return makeError("status.runs has more than 1000 runs");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    auto run = readRun(runs[i], i);
    if (!run) return run.error();
    out.runs.push_back(std::move(*run));
  }
  // What its runs give, whatever their age: the operator wrote it from them.
  ProfileSettings all;
  all.maxAgeSeconds = std::numeric_limits<int64_t>::max() / 2;
  const json& recommendation = member(status, "recommendation");
  if (recommendation.is_null() && !recommend(out.runs, {}, out.runs.back().endedAt, all)) {
    return out;  // runs that needed nothing (a DataLoader without workers): none written
  }
  auto headroom = count(recommendation, "headroomPercent", "status.recommendation");
  auto need = count(recommendation, "needPerRankBytes", "status.recommendation");
  if (!headroom) return headroom.error();
  if (!need) return need.error();
  if (*headroom > 1000) return makeError("status.recommendation.headroomPercent is above 1000");
  out.headroomPercent = *headroom;
  out.needPerRank = *need;
  all.headroomPercent = *headroom;
  auto given = recommend(out.runs, {}, out.runs.back().endedAt, all);
  const uint64_t expected = given ? given->needPerRank : 0;
  if (expected != out.needPerRank) {
    return makeError("status.recommendation.needPerRankBytes is " + std::to_string(out.needPerRank) +
                     ", not the " + std::to_string(expected) + " its runs give (a status edited by hand?)");
  }
  return out;
}

json shmProfileStatus(const std::vector<ProfileRun>& runs, const ProfileSettings& settings, int64_t now) {
  json status = json::object();
  json list = json::array();
  for (const ProfileRun& run : runs) list.push_back(run.toJson());
  status["runs"] = std::move(list);
  status["runCount"] = runs.size();
  if (runs.empty()) return status;
  ProfileSettings all = settings;
  all.maxAgeSeconds = std::numeric_limits<int64_t>::max() / 2;
  auto r = recommend(runs, {}, now, all);
  const ProfileRun& last = runs.back();
  status["inputs"] = last.inputs;
  status["lastSize"] = mib(last.sizeBytes);
  if (!r) return status;
  const uint64_t bytes = r->bytesFor(last.ranks);
  status["peak"] = mib(totalFor(r->peakPerRank, last.ranks));
  status["recommended"] = formatBytes(static_cast<int64_t>(bytes));
  status["recommendation"] = json{{"needPerRankBytes", r->needPerRank},
                                  {"headroomPercent", r->headroomPercent},
                                  {"ranks", last.ranks},
                                  {"bytes", bytes},
                                  {"message", r->words(last.ranks, bytes, std::nullopt)}};
  return status;
}

// What the webhook's watch keeps of a profile, read once at its watch event rather than at
// each admission: per declared inputs, the recommendation of its runs; or why it does not
// read. 10,000 profiles of 10 runs: docs/BENCHMARKS.md.
namespace {
constexpr const char* kKeptMark = "podshaperKept";
}  // namespace

void keepShmProfile(json& object) {
  if (!object.is_object() || member(object, kKeptMark).is_boolean()) return;  // a relist: kept already
  json kept = {{"metadata", json::object()}, {kKeptMark, true}};
  const json& m = member(object, "metadata");
  for (const char* k : {"name", "namespace", "resourceVersion"}) {
    if (m.contains(k)) kept["metadata"][k] = m[k];
  }
  auto profile = readShmProfile(object);
  if (!profile) {
    kept["unreadable"] = profile.error().message;
    object = std::move(kept);
    return;
  }
  ProfileSettings all;
  all.maxAgeSeconds = std::numeric_limits<int64_t>::max() / 2;
  all.headroomPercent = profile->headroomPercent;
  json byInputs = json::array();
  std::vector<std::string> seen;
  for (auto run = profile->runs.rbegin(); run != profile->runs.rend(); ++run) {
    if (std::find(seen.begin(), seen.end(), run->inputs) != seen.end()) continue;
    seen.push_back(run->inputs);
    auto r = recommend(profile->runs, run->inputs, profile->runs.back().endedAt, all);
    if (!r) continue;
    byInputs.push_back(json::array({r->inputs, r->runs, r->deaths, r->needPerRank, r->lowestPerRank, r->peakPerRank,
                                    r->lastEndedAt, r->headroomPercent}));
  }
  kept["recommendations"] = std::move(byInputs);
  object = std::move(kept);
}

Result<std::optional<Recommendation>> profileRecommendation(const json& object, std::string_view inputs) {
  if (!member(object, kKeptMark).is_boolean()) {
    json kept = object;
    keepShmProfile(kept);
    if (!member(kept, kKeptMark).is_boolean()) return makeError("not a ShmProfile object");
    return profileRecommendation(kept, inputs);
  }
  if (const json& why = member(object, "unreadable"); why.is_string()) return makeError(why.get<std::string>());
  for (const json& r : member(object, "recommendations")) {
    if (!r.is_array() || r.size() != 8 || !r[0].is_string() || r[0].get_ref<const std::string&>() != inputs) continue;
    for (std::size_t i = 1; i < 8; ++i) {
      if (!r[i].is_number_integer()) return makeError("a kept recommendation does not read");
    }
    Recommendation out;
    out.inputs = r[0].get<std::string>();
    out.runs = r[1].get<std::size_t>();
    out.deaths = r[2].get<std::size_t>();
    out.needPerRank = r[3].get<uint64_t>();
    out.lowestPerRank = r[4].get<uint64_t>();
    out.peakPerRank = r[5].get<uint64_t>();
    out.lastEndedAt = r[6].get<int64_t>();
    out.headroomPercent = r[7].get<uint64_t>();
    return std::optional(out);
  }
  return std::optional<Recommendation>();
}

}  // namespace podshaper
