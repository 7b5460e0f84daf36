#include "api/shm_profile.h"

#include <gtest/gtest.h>

#include "api/names.h"
#include "base/checked.h"
#include "base/timefmt.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

constexpr uint64_t Mi = kMiB;
constexpr int64_t kNow = 1796223600;  // 2026-12-02T15:00:00Z

// ---- workloadOf: pods as each controller creates them, before any other webhook ----

json controllerRef(std::string_view apiVersion, std::string_view kind, std::string_view name) {
  return {{"apiVersion", apiVersion}, {"kind", kind},           {"name", name},
          {"uid", "0b1c2d3e-0000-4000-8000-000000000001"},      {"controller", true},
          {"blockOwnerDeletion", true}};
}

json podOf(json labels, json owners = json::array(), json annotations = json::object()) {
  json metadata = {{"generateName", "p-"}, {"namespace", "ml"}, {"labels", std::move(labels)}};
  if (!owners.empty()) metadata["ownerReferences"] = std::move(owners);
  if (!annotations.empty()) metadata["annotations"] = std::move(annotations);
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", std::move(metadata)}, {"spec", json::object()}};
}

// What the Job controller puts on its pods (the Job's API defaulting adds the labels to
// its template; pkg/controller/job creates each pod with the Job as its controller).
json jobPod(const std::string& job, json more = json::object()) {
  json labels = {{"batch.kubernetes.io/controller-uid", "0b1c2d3e"},
                 {"batch.kubernetes.io/job-name", job},
                 {"controller-uid", "0b1c2d3e"},
                 {"job-name", job}};
  labels.update(more);
  return podOf(std::move(labels), {controllerRef("batch/v1", "Job", job)});
}

Workload workloadOfOk(const json& pod) {
  auto w = workloadOf(pod);
  EXPECT_TRUE(w.ok()) << (w ? "" : w.error().message);
  if (!w || !w->has_value()) {
    ADD_FAILURE() << "no workload for " << pod.dump();
    return {};
  }
  return **w;
}

// Kubernetes' own rule for an object's name (IsDNS1123Subdomain).
// Written out rather than as a std::regex: GCC 12's sanitizer build warns inside <regex>.
bool isDnsSubdomain(const std::string& name) {
  if (name.empty() || name.size() > 253) {
    return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    const std::string label = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || !alnum(label.front()) || !alnum(label.back())) {
      return false;
    }
    for (char c : label) {
      if (!alnum(c) && c != '-') {
        return false;
      }
    }
    if (dot == std::string::npos) {
      return true;
    }
    start = dot + 1;
  }
}

struct WorkloadCase {
  std::string what;
  json pod;
  std::string kind, name, profile, words;
};

TEST(WorkloadOf, EachControllerAsItLabelsItsPods) {
  const std::vector<WorkloadCase> cases = {
      {"a Job's pod", jobPod("train"), "Job", "train", "job.train", "Job train"},
      {"an Indexed Job's pod", jobPod("train", {{"batch.kubernetes.io/job-completion-index", "3"}}), "Job", "train",
       "job.train", "Job train"},
      // pkg/controller/cronjob: getJobName, "<cronjob>-<scheduled time in minutes since the epoch>".
      {"a CronJob's Job's pod", jobPod("nightly-29937060"), "CronJob", "nightly", "cronjob.nightly", "CronJob nightly"},
      {"a Job whose name ends in a short number is not a CronJob's", jobPod("train-7"), "Job", "train-7", "job.train-7",
       "Job train-7"},
      // kubernetes-sigs/jobset labelAndAnnotateObject: the child Job's pod template.
      {"a JobSet's replicated job",
       jobPod("llama-workers-0", {{"jobset.sigs.k8s.io/jobset-name", "llama"},
                                  {"jobset.sigs.k8s.io/replicatedjob-name", "workers"},
                                  {"jobset.sigs.k8s.io/replicatedjob-replicas", "2"},
                                  {"jobset.sigs.k8s.io/job-index", "0"},
                                  {"jobset.sigs.k8s.io/restart-attempt", "0"}}),
       "JobSet", "llama/workers", "jobset.llama.workers", "JobSet llama, replicated job workers"},
      // kubeflow/training-operator v1.9 (createNewPod: GenLabels, the replica type lowercased;
      // job-role master on the master) with the PyTorchJob as the pod's controller.
      {"a PyTorchJob's worker",
       podOf({{"training.kubeflow.org/operator-name", "pytorchjob-controller"},
              {"training.kubeflow.org/job-name", "bert"},
              {"training.kubeflow.org/replica-type", "worker"},
              {"training.kubeflow.org/replica-index", "1"}},
             {controllerRef("kubeflow.org/v1", "PyTorchJob", "bert")}),
       "PyTorchJob", "bert/worker", "pytorchjob.bert.worker", "PyTorchJob bert, replica type worker"},
      {"a PyTorchJob's master",
       podOf({{"training.kubeflow.org/operator-name", "pytorchjob-controller"},
              {"training.kubeflow.org/job-name", "bert"},
              {"training.kubeflow.org/replica-type", "master"},
              {"training.kubeflow.org/replica-index", "0"},
              {"training.kubeflow.org/job-role", "master"}},
             {controllerRef("kubeflow.org/v1", "PyTorchJob", "bert")}),
       "PyTorchJob", "bert/master", "pytorchjob.bert.master", "PyTorchJob bert, replica type master"},
      // kubeflow/mpi-operator v2beta1 (defaultLabels: job-role, no replica-type): the workers'
      // controller is the MPIJob, the launcher's a batch Job "<mpijob>-launcher".
      {"an MPIJob's worker",
       podOf({{"training.kubeflow.org/operator-name", "mpi-operator"},
              {"training.kubeflow.org/job-name", "hvd"},
              {"training.kubeflow.org/job-role", "worker"},
              {"training.kubeflow.org/replica-index", "0"}},
             {controllerRef("kubeflow.org/v2beta1", "MPIJob", "hvd")}),
       "MPIJob", "hvd/worker", "mpijob.hvd.worker", "MPIJob hvd, replica type worker"},
      {"an MPIJob's launcher (a Job's pod)",
       jobPod("hvd-launcher", {{"training.kubeflow.org/operator-name", "mpi-operator"},
                               {"training.kubeflow.org/job-name", "hvd"},
                               {"training.kubeflow.org/job-role", "launcher"}}),
       "MPIJob", "hvd/launcher", "mpijob.hvd.launcher", "MPIJob hvd, replica type launcher"},
      // ray-project/kuberay labelPod, with the RayCluster as the pod's controller.
      {"a RayCluster's worker group",
       podOf({{"ray.io/is-ray-node", "yes"},
              {"ray.io/cluster", "rc"},
              {"ray.io/node-type", "worker"},
              {"ray.io/group", "gpu-workers"},
              {"ray.io/identifier", "rc-worker"},
              {"app.kubernetes.io/name", "kuberay"},
              {"app.kubernetes.io/created-by", "kuberay-operator"}},
             {controllerRef("ray.io/v1", "RayCluster", "rc")}),
       "RayCluster", "rc/gpu-workers", "raycluster.rc.gpu-workers", "RayCluster rc, worker group gpu-workers"},
      {"a RayCluster's head",
       podOf({{"ray.io/cluster", "rc"}, {"ray.io/node-type", "head"}, {"ray.io/group", "headgroup"}},
             {controllerRef("ray.io/v1", "RayCluster", "rc")}),
       "RayCluster", "rc/headgroup", "raycluster.rc.headgroup", "RayCluster rc, worker group headgroup"},
      // KubeRay puts ray.io/originated-from-* on a RayJob's RayCluster and submitter Job,
      // not on the cluster's pods (utils/constant.go): a RayJob's worker is known by its
      // cluster, "<rayjob>-<5 random letters>", a name each new RayJob changes.
      {"a RayJob's worker, as KubeRay makes it",
       podOf({{"ray.io/cluster", "train-x7k2p"}, {"ray.io/node-type", "worker"}, {"ray.io/group", "gpu"}},
             {controllerRef("ray.io/v1", "RayCluster", "train-x7k2p")}),
       "RayCluster", "train-x7k2p/gpu", "raycluster.train-x7k2p.gpu", "RayCluster train-x7k2p, worker group gpu"},
      {"a RayJob's worker whose group template carries the originated-from labels",
       podOf({{"ray.io/cluster", "train-x7k2p"},
              {"ray.io/group", "gpu"},
              {"ray.io/originated-from-crd", "RayJob"},
              {"ray.io/originated-from-cr-name", "train"}},
             {controllerRef("ray.io/v1", "RayCluster", "train-x7k2p")}),
       "RayJob", "train/gpu", "rayjob.train.gpu", "RayJob train, worker group gpu"},
      // kubernetes-sigs/lws: the leader StatefulSet "<lws>" labels worker-index 0; a group's
      // workers (StatefulSet "<lws>-<group>") get worker-index from LWS's own pod webhook,
      // which may run before podshaper's or after it.
      {"a LeaderWorkerSet's leader",
       podOf({{"leaderworkerset.sigs.k8s.io/name", "vllm"},
              {"leaderworkerset.sigs.k8s.io/worker-index", "0"},
              {"leaderworkerset.sigs.k8s.io/template-revision-hash", "5c7b"}},
             {controllerRef("apps/v1", "StatefulSet", "vllm")}),
       "LeaderWorkerSet", "vllm/leader", "leaderworkerset.vllm.leader", "LeaderWorkerSet vllm, leader"},
      {"a LeaderWorkerSet's worker before LWS's webhook",
       podOf({{"leaderworkerset.sigs.k8s.io/name", "vllm"},
              {"leaderworkerset.sigs.k8s.io/group-index", "0"},
              {"leaderworkerset.sigs.k8s.io/group-key", "9f0e"}},
             {controllerRef("apps/v1", "StatefulSet", "vllm-0")}),
       "LeaderWorkerSet", "vllm/worker", "leaderworkerset.vllm.worker", "LeaderWorkerSet vllm, worker"},
      {"a LeaderWorkerSet's worker after LWS's webhook",
       podOf({{"leaderworkerset.sigs.k8s.io/name", "vllm"},
              {"leaderworkerset.sigs.k8s.io/group-index", "1"},
              {"leaderworkerset.sigs.k8s.io/worker-index", "3"}},
             {controllerRef("apps/v1", "StatefulSet", "vllm-1")}),
       "LeaderWorkerSet", "vllm/worker", "leaderworkerset.vllm.worker", "LeaderWorkerSet vllm, worker"},
      // A Deployment names its ReplicaSet "<deployment>-<pod-template-hash>".
      {"a Deployment's pod",
       podOf({{"app", "serve"}, {"pod-template-hash", "5d8f7c9b4"}},
             {controllerRef("apps/v1", "ReplicaSet", "serve-5d8f7c9b4")}),
       "Deployment", "serve", "deployment.serve", "Deployment serve"},
      {"a ReplicaSet of its own",
       podOf({{"app", "serve"}}, {controllerRef("apps/v1", "ReplicaSet", "serve-rs")}), "ReplicaSet", "serve-rs",
       "replicaset.serve-rs", "ReplicaSet serve-rs"},
      {"a StatefulSet's pod",
       podOf({{"controller-revision-hash", "db-6c9d"},
              {"statefulset.kubernetes.io/pod-name", "db-0"},
              {"apps.kubernetes.io/pod-index", "0"}},
             {controllerRef("apps/v1", "StatefulSet", "db")}),
       "StatefulSet", "db", "statefulset.db", "StatefulSet db"},
      {"any other controller",
       podOf(json::object(), {controllerRef("argoproj.io/v1alpha1", "Workflow", "etl")}), "Workflow", "etl",
       "workflow.etl", "Workflow etl"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const Workload w = workloadOfOk(c.pod);
    EXPECT_EQ(w.kind, c.kind);
    EXPECT_EQ(w.name, c.name);
    EXPECT_EQ(w.profile, c.profile);
    EXPECT_EQ(w.words(), c.words);
    EXPECT_TRUE(isDnsSubdomain(w.profile)) << w.profile;
  }
}

TEST(WorkloadOf, TheControllerIsTheReferenceMarkedController) {
  json owners = json::array({{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "cfg"}, {"uid", "1"}},
                             controllerRef("batch/v1", "Job", "train")});
  EXPECT_EQ(workloadOfOk(podOf(json::object(), owners)).profile, "job.train");
  // Owned, but by nothing that controls it: no next run to size.
  json notController = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "cfg"}, {"controller", false}};
  auto w = workloadOf(podOf(json::object(), json::array({notController})));
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->has_value());
}

TEST(WorkloadOf, ABarePodHasNone) {
  for (const json& pod : {podOf(json::object()), podOf({{"app", "x"}, {"podshaper.io/inject", "true"}}),
                          json{{"kind", "Pod"}}, json::object()}) {
    auto w = workloadOf(pod);
    ASSERT_TRUE(w.ok()) << pod.dump();
    EXPECT_FALSE(w->has_value()) << pod.dump();
  }
}

TEST(WorkloadOf, TheUsersAnnotationWins) {
  json pod = jobPod("llama-workers-0", {{"jobset.sigs.k8s.io/jobset-name", "llama"}});
  pod["metadata"]["annotations"][names::kWorkload] = "llama-7b.pretrain";
  const Workload w = workloadOfOk(pod);
  EXPECT_EQ(w.kind, "");
  EXPECT_EQ(w.name, "llama-7b.pretrain");
  EXPECT_EQ(w.profile, "llama-7b.pretrain");
  EXPECT_EQ(w.words(), "workload \"llama-7b.pretrain\" (podshaper.io/workload)");
  // On a bare pod too: the user names the runs that belong together.
  EXPECT_EQ(workloadOfOk(podOf(json::object(), json::array(), {{names::kWorkload, "sweep"}})).profile, "sweep");
}

TEST(WorkloadOf, AnAnnotationThatCannotNameAProfileIsAnError) {
  for (const std::string& bad : std::vector<std::string>{"", "Train", "train_7b", "-train", "train.", "a..b", "a.-b",
                                                         "a-.b", "a b",
                                std::string(254, 'a')}) {
    SCOPED_TRACE(bad);
    json pod = jobPod("train");
    pod["metadata"]["annotations"][names::kWorkload] = bad;
    auto w = workloadOf(pod);
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().message.find("podshaper.io/workload \""), std::string::npos) << w.error().message;
    EXPECT_NE(w.error().message.find("is not a name a ShmProfile can have"), std::string::npos);
  }
  auto longest = workloadOf(podOf(json::object(), json::array(), {{names::kWorkload, std::string(253, 'a')}}));
  ASSERT_TRUE(longest.ok());
  EXPECT_EQ((*longest)->profile.size(), 253u);
}

TEST(WorkloadOf, ProfileNamesAreLowercaseSubdomains) {
  // Label values may hold capitals and underscores (a Ray group "GPU_Workers"); names may not.
  json ray = podOf({{"ray.io/cluster", "rc"}, {"ray.io/group", "GPU_Workers"}},
                   {controllerRef("ray.io/v1", "RayCluster", "rc")});
  EXPECT_EQ(workloadOfOk(ray).profile, "raycluster.rc.gpu-workers");
  json dotted = podOf({{"ray.io/cluster", "rc"}, {"ray.io/group", "a..b_"}},
                      {controllerRef("ray.io/v1", "RayCluster", "rc")});
  EXPECT_TRUE(isDnsSubdomain(workloadOfOk(dotted).profile)) << workloadOfOk(dotted).profile;
}

TEST(WorkloadOf, ATooLongNameIsCutWithAHashOfTheWhole) {
  const std::string longName = std::string(240, 'w') + "-end";
  const Workload a = workloadOfOk(podOf(json::object(), {controllerRef("x.io/v1", "Workflow", longName + "a")}));
  const Workload b = workloadOfOk(podOf(json::object(), {controllerRef("x.io/v1", "Workflow", longName + "b")}));
  EXPECT_EQ(a.profile.size(), 253u);
  EXPECT_TRUE(isDnsSubdomain(a.profile)) << a.profile;
  EXPECT_TRUE(a.profile.starts_with("workflow.www"));
  EXPECT_NE(a.profile, b.profile);  // the hash tells them apart
  EXPECT_EQ(a.profile.substr(0, 244), b.profile.substr(0, 244));
  const json again = podOf(json::object(), {controllerRef("x.io/v1", "Workflow", longName + "a")});
  EXPECT_EQ(workloadOfOk(again).profile, a.profile);
  // Cut where a '.' or '-' would end the kept part, the name stays a subdomain.
  const std::string dotted = std::string(234, 'w') + ".." + std::string(30, 'x');
  const Workload c = workloadOfOk(podOf(json::object(), {controllerRef("x.io/v1", "Workflow", dotted)}));
  EXPECT_LE(c.profile.size(), 253u);
  EXPECT_TRUE(isDnsSubdomain(c.profile)) << c.profile;
  // The full name is kept for people.
  EXPECT_EQ(a.name, longName + "a");
}

// ---- declaredInputs ----

json annotated(json annotations) { return podOf({{"app", "x"}}, json::array(), std::move(annotations)); }

const json kInputs = {{names::kWorkers, "4"},          {names::kPrefetchFactor, "2"},
                      {names::kBatchShape, "32x3x224x224"}, {names::kBatchDtype, "float32"},
                      {names::kNcclCommunicators, "2"},     {names::kRanksPerPod, "2"}};

TEST(DeclaredInputs, TheSameAnnotationsGiveTheSameInputs) {
  const std::string base = declaredInputs(annotated(kInputs));
  EXPECT_EQ(base.size(), 8u);
  EXPECT_EQ(base.find_first_not_of("0123456789abcdef"), std::string::npos) << base;
  EXPECT_EQ(declaredInputs(annotated(kInputs)), base);
  // Labels, other annotations and the ranks do not change what one rank's /dev/shm holds.
  json other = annotated(kInputs);
  other["metadata"]["labels"]["team"] = "nlp";
  other["metadata"]["annotations"]["example.com/owner"] = "ada";
  other["metadata"]["annotations"][names::kPlacement] = "per-gpu";
  other["metadata"]["annotations"][names::kRanksPerPod] = "8";
  EXPECT_EQ(declaredInputs(other), base);
  other["metadata"]["annotations"].erase(names::kRanksPerPod);
  EXPECT_EQ(declaredInputs(other), base);
}

TEST(DeclaredInputs, EachBatchAnnotationChangesThem) {
  const std::string base = declaredInputs(annotated(kInputs));
  for (std::string_view key : {names::kWorkers, names::kPrefetchFactor, names::kBatchShape, names::kBatchDtype,
                               names::kNcclCommunicators}) {
    SCOPED_TRACE(key);
    json changed = kInputs;
    changed[std::string(key)] = "5";
    EXPECT_NE(declaredInputs(annotated(changed)), base);
    json removed = kInputs;
    removed.erase(std::string(key));
    EXPECT_NE(declaredInputs(annotated(removed)), base);
  }
  json bytes = kInputs;
  bytes[std::string(names::kBatchBytes)] = "19267584";
  EXPECT_NE(declaredInputs(annotated(bytes)), base);
  // A value is not confused with the next key's: "4" then "2" is not "42" then "".
  EXPECT_NE(declaredInputs(annotated({{names::kWorkers, "42"}, {names::kPrefetchFactor, ""}})),
            declaredInputs(annotated({{names::kWorkers, "4"}, {names::kPrefetchFactor, "2"}})));
  EXPECT_NE(declaredInputs(annotated(json::object())), base);
}

// ---- the pod's podshaper.io/shm-profile annotation ----

TEST(ProfiledPod, RoundTrip) {
  const ProfiledPod pod{"jobset.llama.workers", 8, "3f9a0c12"};
  EXPECT_EQ(pod.annotation(), "jobset.llama.workers; ranks=8; inputs=3f9a0c12");
  auto back = parseProfiledPod(pod.annotation());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->profile, pod.profile);
  EXPECT_EQ(back->ranks, pod.ranks);
  EXPECT_EQ(back->inputs, pod.inputs);
  auto tight = parseProfiledPod("job.train;ranks=2;inputs=ab");
  ASSERT_TRUE(tight.has_value());
  EXPECT_EQ(tight->ranks, 2u);
  EXPECT_EQ(tight->inputs, "ab");
}

TEST(ProfiledPod, NonsenseIsNotRead) {
  for (std::string_view bad :
       {"", "job.train", "job.train; ranks=2", "job.train; inputs=ab", "; ranks=2; inputs=ab",
        "Job.Train; ranks=2; inputs=ab", "job.train; ranks=0; inputs=ab", "job.train; ranks=-1; inputs=ab",
        "job.train; ranks=two; inputs=ab", "job.train; ranks=99999999999999999999999; inputs=ab",
        "job.train; ranks=2; inputs=", "job.train; ranks=2; inputs=ab; size=1Gi", "job.train; ranks=2; inputs=ab;"}) {
    EXPECT_FALSE(parseProfiledPod(bad).has_value()) << bad;
  }
}

// ---- runs and the recommendation ----

TEST(RunEnd, NamesRoundTrip) {
  for (RunEnd end : {RunEnd::kCompleted, RunEnd::kFailed, RunEnd::kShmExhausted, RunEnd::kEnded}) {
    EXPECT_EQ(parseRunEnd(toString(end)), end);
  }
  EXPECT_EQ(std::string(toString(RunEnd::kShmExhausted)), "ShmExhausted");
  EXPECT_FALSE(parseRunEnd("completed").has_value());
  EXPECT_FALSE(parseRunEnd("").has_value());
}

ProfileRun runOf(uint64_t ranks, uint64_t peak, int64_t agoSeconds, RunEnd end = RunEnd::kCompleted,
                 uint64_t size = 0, std::string inputs = "aaaa0001") {
  static int64_t number = 0;
  ProfileRun r;
  r.pod = "train-" + std::to_string(++number);
  r.podUID = "uid-" + std::to_string(number);
  r.run = 1;
  r.endedAt = kNow - agoSeconds;
  r.ranks = ranks;
  r.sizeBytes = size != 0 ? size : std::max<uint64_t>(peak, 1024 * Mi);
  r.peakBytes = peak;
  r.end = end;
  r.inputs = std::move(inputs);
  return r;
}

ProfileSettings settingsWith(uint64_t headroom) {
  ProfileSettings s;
  s.headroomPercent = headroom;
  return s;
}

TEST(ProfileRun, ADeathNeedsTwiceItsSize) {
  EXPECT_EQ(runOf(1, 300 * Mi, 0, RunEnd::kCompleted, 512 * Mi).needBytes(), 300 * Mi);
  EXPECT_EQ(runOf(1, 300 * Mi, 0, RunEnd::kFailed, 512 * Mi).needBytes(), 300 * Mi);
  EXPECT_EQ(runOf(1, 300 * Mi, 0, RunEnd::kEnded, 512 * Mi).needBytes(), 300 * Mi);
  EXPECT_EQ(runOf(1, 512 * Mi, 0, RunEnd::kShmExhausted, 512 * Mi).needBytes(), 1024 * Mi);
  // Its peak where the peak is higher (a size written smaller than the volume it had).
  ProfileRun odd = runOf(1, 300 * Mi, 0, RunEnd::kShmExhausted, 64 * Mi);
  odd.peakBytes = 300 * Mi;
  EXPECT_EQ(odd.needBytes(), 300 * Mi);
}

TEST(Recommend, TheHighestNeedPerRankOfTheRuns) {
  const std::vector<ProfileRun> runs = {runOf(2, 300 * Mi, 5 * 3600), runOf(2, 412 * Mi, 4 * 3600),
                                        runOf(2, 380 * Mi, 2 * 3600)};
  auto r = recommend(runs, {}, kNow, settingsWith(20));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->inputs, "aaaa0001");
  EXPECT_EQ(r->runs, 3u);
  EXPECT_EQ(r->deaths, 0u);
  EXPECT_EQ(r->needPerRank, 206 * Mi);
  EXPECT_EQ(r->peakPerRank, 206 * Mi);
  EXPECT_EQ(r->lowestPerRank, 150 * Mi);
  EXPECT_EQ(r->lastEndedAt, kNow - 2 * 3600);
  EXPECT_EQ(r->headroomPercent, 20u);
  EXPECT_FALSE(r->varies());
  EXPECT_EQ(r->bytesFor(2), 495 * Mi);  // 412Mi × 1.2 = 494.4Mi, up to a whole Mi
  EXPECT_EQ(r->words(2, r->bytesFor(2), kNow), "peak 412Mi per 2 ranks over 3 runs, the last 2 h ago, + 20% = 495Mi");
  EXPECT_EQ(r->words(2, r->bytesFor(2), std::nullopt),
            "peak 412Mi per 2 ranks over 3 runs, the last ended 2026-12-02T13:00:00Z, + 20% = 495Mi");
  EXPECT_EQ(r->words(1, r->bytesFor(1), kNow), "peak 206Mi per rank over 3 runs, the last 2 h ago, + 20% = 248Mi");
}

TEST(Recommend, ADeathCountsTwiceItsSize) {
  const std::vector<ProfileRun> runs = {runOf(2, 300 * Mi, 3600),
                                        runOf(2, 256 * Mi, 60, RunEnd::kShmExhausted, 256 * Mi)};
  auto r = recommend(runs, {}, kNow, settingsWith(20));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->deaths, 1u);
  EXPECT_EQ(r->needPerRank, 256 * Mi);  // 2 × 256Mi over 2 ranks
  EXPECT_EQ(r->peakPerRank, 150 * Mi);
  EXPECT_EQ(r->bytesFor(2), 615 * Mi);  // 512Mi × 1.2 = 614.4Mi
  EXPECT_EQ(r->words(2, r->bytesFor(2), kNow),
            "need 512Mi per 2 ranks over 2 runs, the last 1 min ago (1 died of a full /dev/shm, counted as needing "
            "2× its size), + 20% = 615Mi");
}

TEST(Recommend, ADeathALaterRunPeakedPastIsLeftOut) {
  // Died with 256Mi over 2 ranks (128Mi a rank); a later run of 4 ranks peaked at 600Mi
  // (150Mi a rank): its measured peak says more than the death's doubled size.
  auto past = recommend({runOf(2, 256 * Mi, 7200, RunEnd::kShmExhausted, 256 * Mi), runOf(4, 600 * Mi, 3600)}, {},
                        kNow, settingsWith(20));
  ASSERT_TRUE(past.has_value());
  EXPECT_EQ(past->deaths, 0u);
  EXPECT_EQ(past->runs, 1u);
  EXPECT_EQ(past->needPerRank, 150 * Mi);
  EXPECT_EQ(past->words(4, past->bytesFor(4), kNow),
            "peak 600Mi per 4 ranks over 1 run, the last 1 h ago, + 20% = 720Mi");
  // At the death's size a rank is past it too.
  auto at = recommend({runOf(2, 256 * Mi, 7200, RunEnd::kShmExhausted, 256 * Mi), runOf(2, 256 * Mi, 3600)}, {}, kNow,
                      settingsWith(20));
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->deaths, 0u);
  // Below it, or before the death, or a later death, the death counts.
  for (const auto& runs : std::vector<std::vector<ProfileRun>>{
           {runOf(2, 256 * Mi, 7200, RunEnd::kShmExhausted, 256 * Mi), runOf(2, 200 * Mi, 3600)},
           {runOf(2, 300 * Mi, 7200), runOf(2, 256 * Mi, 3600, RunEnd::kShmExhausted, 256 * Mi)},
           {runOf(2, 256 * Mi, 7200, RunEnd::kShmExhausted, 256 * Mi),
            runOf(2, 300 * Mi, 3600, RunEnd::kShmExhausted, 300 * Mi)}}) {
    auto r = recommend(runs, {}, kNow, settingsWith(20));
    ASSERT_TRUE(r.has_value());
    EXPECT_GE(r->deaths, 1u);
    EXPECT_GE(r->needPerRank, 256 * Mi);
  }
}

TEST(Recommend, RunsOlderThanMaxAgeAreNotUsed) {
  ProfileSettings s = settingsWith(0);
  s.maxAgeSeconds = 7 * 86400;
  const std::vector<ProfileRun> runs = {runOf(1, 900 * Mi, 7 * 86400 + 1), runOf(1, 500 * Mi, 7 * 86400),
                                        runOf(1, 100 * Mi, 3 * 86400)};
  auto r = recommend(runs, {}, kNow, s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->runs, 2u);                   // the one a second past maxAge is gone
  EXPECT_EQ(r->needPerRank, 500 * Mi);      // the one at maxAge is kept
  EXPECT_EQ(r->lastEndedAt, kNow - 3 * 86400);
  EXPECT_EQ(r->words(1, r->bytesFor(1), kNow), "peak 500Mi per rank over 2 runs, the last 3 d ago; the runs vary from "
                                               "100Mi to 500Mi, more than 2×: the highest is used, + 0% = 500Mi");
  EXPECT_FALSE(recommend({runOf(1, 900 * Mi, 8 * 86400)}, {}, kNow, s).has_value());
}

TEST(Recommend, RunsOfDifferentRanksCompareByRank) {
  // A 2-rank run and a 4-rank run: per rank 200Mi and 150Mi.
  const std::vector<ProfileRun> runs = {runOf(2, 400 * Mi, 7200), runOf(4, 600 * Mi, 3600)};
  auto r = recommend(runs, {}, kNow, settingsWith(20));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->needPerRank, 200 * Mi);
  EXPECT_EQ(r->lowestPerRank, 150 * Mi);
  EXPECT_EQ(r->bytesFor(4), 960 * Mi);  // 800Mi × 1.2
  EXPECT_EQ(r->bytesFor(1), 240 * Mi);
  EXPECT_EQ(r->bytesFor(0), 240 * Mi);  // no ranks said: one
  EXPECT_EQ(r->words(4, r->bytesFor(4), kNow), "peak 800Mi per 4 ranks over 2 runs, the last 1 h ago, + 20% = 960Mi");
}

TEST(Recommend, PerRankBytesAreRoundedUp) {
  auto r = recommend({runOf(2, 101, 60), runOf(3, 100, 60)}, {}, kNow, settingsWith(0));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->needPerRank, 51u);  // 101 over 2 ranks; 100 over 3 is 34
  EXPECT_EQ(r->lowestPerRank, 34u);
  EXPECT_EQ(r->bytesFor(2), 1 * Mi);  // what is left of a MiB is a MiB
}

TEST(Recommend, APeakOfWholeMiBOverRanksThatDoNotDivideItReadsAsItWas) {
  // 412Mi over 3 ranks is 144004437.33 bytes a rank, rounded up: three times that is 2
  // bytes above 412Mi. The words and the size are of the 412Mi measured, not of 413Mi.
  auto r = recommend({runOf(3, 412 * Mi, 7200)}, {}, kNow, settingsWith(20));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->needPerRank, 144004438u);
  EXPECT_EQ(r->bytesFor(3), 495 * Mi);
  EXPECT_EQ(r->words(3, r->bytesFor(3), kNow), "peak 412Mi per 3 ranks over 1 run, the last 2 h ago, + 20% = 495Mi");
  // 5Mi + 20% is 6Mi exactly: the 2 bytes of rounding must not make it 7Mi.
  auto small = recommend({runOf(3, 5 * Mi, 60)}, {}, kNow, settingsWith(20));
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->bytesFor(3), 6 * Mi);
  EXPECT_EQ(small->words(3, small->bytesFor(3), kNow),
            "peak 5Mi per 3 ranks over 1 run, the last 1 min ago, + 20% = 6Mi");
  // Never less than what was measured, whatever the ranks (peaks are whole pages).
  for (uint64_t ranks : std::vector<uint64_t>{1, 2, 3, 5, 6, 7, 12}) {
    for (uint64_t peak : std::vector<uint64_t>{4096, 412 * Mi, 412 * Mi + 4096, 1000 * Mi - 4096, 96 * 1024 * Mi}) {
      auto each = recommend({runOf(ranks, peak, 60, RunEnd::kCompleted, 200 * 1024 * Mi)}, {}, kNow, settingsWith(0));
      ASSERT_TRUE(each.has_value());
      EXPECT_GE(each->bytesFor(ranks), peak) << ranks << " ranks, peak " << peak;
      EXPECT_EQ(each->bytesFor(ranks), ceilMiB(peak) * Mi) << ranks << " ranks, peak " << peak;
    }
  }
}

TEST(Recommend, HeadroomAndFloor) {
  auto r = recommend({runOf(1, 100 * Mi, 60)}, {}, kNow, settingsWith(0));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->bytesFor(1), 100 * Mi);
  r->headroomPercent = 50;
  EXPECT_EQ(r->bytesFor(1), 150 * Mi);
  r->headroomPercent = 1;
  EXPECT_EQ(r->bytesFor(1), 101 * Mi);
  EXPECT_EQ(r->bytesFor(1, 512 * Mi), 512 * Mi);  // the floor where it is more
  EXPECT_EQ(r->bytesFor(1, 64 * Mi), 101 * Mi);
}

TEST(Recommend, OnlyRunsOfTheSameInputs) {
  const std::vector<ProfileRun> runs = {runOf(1, 900 * Mi, 7200, RunEnd::kCompleted, 0, "bbbb0002"),
                                        runOf(1, 200 * Mi, 3600, RunEnd::kCompleted, 0, "aaaa0001"),
                                        runOf(1, 300 * Mi, 60, RunEnd::kCompleted, 0, "aaaa0001")};
  auto latest = recommend(runs, {}, kNow, settingsWith(0));  // the latest run's inputs
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->inputs, "aaaa0001");
  EXPECT_EQ(latest->runs, 2u);
  EXPECT_EQ(latest->needPerRank, 300 * Mi);
  auto other = recommend(runs, "bbbb0002", kNow, settingsWith(0));
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->runs, 1u);
  EXPECT_EQ(other->needPerRank, 900 * Mi);
  EXPECT_FALSE(recommend(runs, "cccc0003", kNow, settingsWith(0)).has_value());
  EXPECT_FALSE(recommend({}, {}, kNow, settingsWith(0)).has_value());
}

TEST(Recommend, AnOutlierMakesTheRunsVary) {
  auto close = recommend({runOf(1, 100 * Mi, 120), runOf(1, 200 * Mi, 60)}, {}, kNow, settingsWith(20));
  ASSERT_TRUE(close.has_value());
  EXPECT_FALSE(close->varies());  // twice is not more than twice
  auto wide = recommend({runOf(1, 100 * Mi, 180), runOf(1, 110 * Mi, 120), runOf(1, 500 * Mi, 60)}, {}, kNow,
                        settingsWith(20));
  ASSERT_TRUE(wide.has_value());
  EXPECT_TRUE(wide->varies());
  EXPECT_EQ(wide->needPerRank, 500 * Mi);
  EXPECT_EQ(wide->words(2, wide->bytesFor(2), kNow),
            "peak 1000Mi per 2 ranks over 3 runs, the last 1 min ago; the runs vary from 200Mi to 1000Mi, more than "
            "2×: the highest is used, + 20% = 1200Mi");
}

// ---- the ShmProfile object: what the operator writes and the webhook reads ----

// Runs of 2 and 4 ranks, the latest died of a full /dev/shm.
std::vector<ProfileRun> someRuns() {
  return {runOf(2, 300 * Mi, 5 * 3600), runOf(2, 412 * Mi, 4 * 3600), runOf(4, 600 * Mi, 3 * 3600),
          runOf(2, 256 * Mi, 2 * 3600, RunEnd::kShmExhausted, 256 * Mi)};
}

json profileObject(const std::vector<ProfileRun>& runs, const ProfileSettings& settings = settingsWith(20)) {
  return {{"apiVersion", "podshaper.io/v1alpha1"},
          {"kind", "ShmProfile"},
          {"metadata",
           {{"name", "job.train"},
            {"namespace", "ml"},
            {"uid", "6f1d0c5e-0000-4000-8000-000000000002"},
            {"resourceVersion", "48213"},
            {"generation", 1},
            {"creationTimestamp", "2026-12-01T09:00:00Z"},
            {"labels", {{"app.kubernetes.io/managed-by", "podshaper-operator"}}},
            {"managedFields", json::array({{{"manager", "podshaper-operator"}, {"operation", "Apply"}}})}}},
          {"spec", {{"workload", "Job train"}, {"kind", "Job"}}},
          {"status", shmProfileStatus(runs, settings, kNow)}};
}

TEST(ShmProfileStatus, ColumnsAndTheRecommendation) {
  const json status = shmProfileStatus(someRuns(), settingsWith(20), kNow);
  EXPECT_EQ(status["runCount"], 4);
  EXPECT_EQ(status["runs"].size(), 4u);
  EXPECT_EQ(status["runs"][0]["endedAt"], "2026-12-02T10:00:00Z");
  EXPECT_EQ(status["runs"][3]["end"], "ShmExhausted");
  EXPECT_EQ(status["inputs"], "aaaa0001");
  EXPECT_EQ(status["lastSize"], "256Mi");
  // The death's 2 × 256Mi over 2 ranks is the most a rank needed: 256Mi, for the 2 ranks
  // of the latest run 512Mi, + 20%.
  EXPECT_EQ(status["recommendation"]["needPerRankBytes"], 256 * Mi);
  EXPECT_EQ(status["recommendation"]["headroomPercent"], 20);
  EXPECT_EQ(status["recommendation"]["ranks"], 2);
  EXPECT_EQ(status["recommendation"]["bytes"], 615 * Mi);
  EXPECT_EQ(status["recommended"], "615Mi");
  EXPECT_EQ(status["peak"], "412Mi");  // 206Mi a rank at the 412Mi run, × 2
  EXPECT_EQ(status["recommendation"]["message"],
            "need 512Mi per 2 ranks over 4 runs, the last ended 2026-12-02T13:00:00Z (1 died of a full /dev/shm, "
            "counted as needing 2× its size), + 20% = 615Mi");
}

TEST(ReadShmProfile, WhatTheOperatorWroteReadsBack) {
  const std::vector<ProfileRun> runs = someRuns();
  auto read = readShmProfile(profileObject(runs));
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->namespaceName, "ml");
  EXPECT_EQ(read->name, "job.train");
  EXPECT_EQ(read->workload, "Job train");
  EXPECT_EQ(read->headroomPercent, 20u);
  EXPECT_EQ(read->needPerRank, 256 * Mi);
  ASSERT_EQ(read->runs.size(), runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(read->runs[i].toJson(), runs[i].toJson()) << i;
  }
  auto r = recommend(read->runs, {}, kNow, settingsWith(read->headroomPercent));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->needPerRank, read->needPerRank);
}

TEST(ReadShmProfile, RunsThatNeededNothingReadBack) {
  // A DataLoader without workers leaves /dev/shm empty: runs, but nothing to recommend.
  const std::vector<ProfileRun> runs = {runOf(1, 0, 3600), runOf(1, 0, 60)};
  const json object = profileObject(runs);
  EXPECT_FALSE(object["status"].contains("recommendation"));
  auto read = readShmProfile(object);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->needPerRank, 0u);
  EXPECT_EQ(read->runs.size(), 2u);
}

struct Nonsense {
  std::string what;
  std::string pointer;  // a JSON Pointer into the object
  json value;           // null: the member removed
  std::string error;    // what the error says
};

TEST(ReadShmProfile, NonsenseIsAnErrorThatSaysWhat) {
  const std::vector<Nonsense> cases = {
      {"no name", "/metadata/name", nullptr, "metadata lacks name or namespace"},
      {"no namespace", "/metadata/namespace", nullptr, "metadata lacks name or namespace"},
      {"no runs", "/status/runs", json::array(), "status.runs is empty"},
      {"runs missing", "/status/runs", nullptr, "status.runs is missing"},
      {"runs not a list", "/status/runs", json::object(), "status.runs is not a list"},
      {"a run not an object", "/status/runs/1", 7, "status.runs[1] is not an object"},
      {"ranks as text", "/status/runs/0/ranks", "2", "status.runs[0].ranks is not a count"},
      {"a negative peak", "/status/runs/0/peakBytes", -1, "status.runs[0].peakBytes is not a count"},
      {"a fractional size", "/status/runs/0/sizeBytes", 1.5, "status.runs[0].sizeBytes is not a count"},
      {"a negative run number", "/status/runs/2/run", -3, "status.runs[2].run is not a count"},
      {"no ranks", "/status/runs/0/ranks", 0, "status.runs[0].ranks is not between 1 and 1000000"},
      {"too many ranks", "/status/runs/0/ranks", 1000001, "status.runs[0].ranks is not between 1 and 1000000"},
      {"no size", "/status/runs/0/sizeBytes", 0, "status.runs[0].sizeBytes is not between 1 and 1Pi"},
      {"a size past a PiB", "/status/runs/0/sizeBytes", (1ULL << 50) + 1,
       "status.runs[0].sizeBytes is not between 1 and 1Pi"},
      {"a peak above the size", "/status/runs/1/peakBytes", 2048 * Mi,
       "status.runs[1].peakBytes is above its sizeBytes: a /dev/shm holds no more than its size"},
      {"an unknown end", "/status/runs/0/end", "Crashed",
       "status.runs[0].end \"Crashed\" is not Completed, Failed, ShmExhausted or Ended"},
      {"an end of another type", "/status/runs/0/end", 3, "status.runs[0] lacks endedAt, end or inputs"},
      {"a time that is not one", "/status/runs/3/endedAt", "yesterday",
       "status.runs[3].endedAt \"yesterday\" is not a time"},
      {"no time", "/status/runs/3/endedAt", nullptr, "status.runs[3] lacks endedAt, end or inputs"},
      {"no inputs", "/status/runs/0/inputs", "", "status.runs[0] lacks endedAt, end or inputs"},
      {"no recommendation", "/status/recommendation", nullptr, "status.recommendation.headroomPercent is not a count"},
      {"a need edited by hand", "/status/recommendation/needPerRankBytes", 100 * Mi,
       "status.recommendation.needPerRankBytes is 104857600, not the 268435456 its runs give (a status edited by "
       "hand?)"},
      {"a need as text", "/status/recommendation/needPerRankBytes", "256Mi",
       "status.recommendation.needPerRankBytes is not a count"},
      {"headroom above 1000%", "/status/recommendation/headroomPercent", 1001,
       "status.recommendation.headroomPercent is above 1000"},
      {"a negative headroom", "/status/recommendation/headroomPercent", -20,
       "status.recommendation.headroomPercent is not a count"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    json object = profileObject(someRuns());
    const json::json_pointer at(c.pointer);
    if (c.value.is_null()) {
      object.at(at.parent_pointer()).erase(at.back());
    } else {
      object[at] = c.value;
    }
    auto read = readShmProfile(object);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.error().message, c.error);
  }
  EXPECT_FALSE(readShmProfile(json::array()).ok());
  EXPECT_FALSE(readShmProfile(json("ShmProfile")).ok());
  // Its runs are bounded: a status is at most about 1 MiB, a run about 200 bytes.
  std::vector<ProfileRun> many(1001, runOf(1, Mi, 60));
  auto tooMany = readShmProfile(profileObject(many));
  ASSERT_FALSE(tooMany.ok());
  EXPECT_EQ(tooMany.error().message, "status.runs has more than 1000 runs");
  EXPECT_TRUE(readShmProfile(profileObject(std::vector<ProfileRun>(1000, runOf(1, Mi, 60)))).ok());
  // The headroom at its bound reads.
  json atBound = profileObject(someRuns());
  atBound["status"]["recommendation"]["headroomPercent"] = 1000;
  EXPECT_TRUE(readShmProfile(atBound).ok());
}

TEST(KeepShmProfile, KeepsTheRecommendationOfEachInputs) {
  const json whole = profileObject(someRuns());
  json kept = whole;
  keepShmProfile(kept);
  EXPECT_EQ(kept["metadata"], json({{"name", "job.train"}, {"namespace", "ml"}, {"resourceVersion", "48213"}}));
  EXPECT_FALSE(kept.contains("status"));
  EXPECT_LT(kept.dump().size(), whole.dump().size() / 3);
  // The same recommendation as from the whole object, for the runs' inputs; none for others.
  const std::string inputs = someRuns().back().inputs;
  auto fromKept = profileRecommendation(kept, inputs);
  auto fromWhole = profileRecommendation(whole, inputs);
  ASSERT_TRUE(fromKept.ok()) << fromKept.error().message;
  ASSERT_TRUE(fromWhole.ok()) << fromWhole.error().message;
  ASSERT_TRUE(fromKept->has_value());
  EXPECT_EQ((*fromKept)->needPerRank, 256 * Mi);
  EXPECT_EQ((*fromKept)->needPerRank, (*fromWhole)->needPerRank);
  EXPECT_EQ((*fromKept)->runs, (*fromWhole)->runs);
  EXPECT_EQ((*fromKept)->lastEndedAt, (*fromWhole)->lastEndedAt);
  EXPECT_EQ((*fromKept)->headroomPercent, 20u);
  auto other = profileRecommendation(kept, "00000000");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
  // Kept twice is kept once (a relist transforms what a watch already had).
  json again = kept;
  keepShmProfile(again);
  EXPECT_EQ(again, kept);
}

TEST(KeepShmProfile, KeepsWhyNonsenseDoesNotRead) {
  json object = profileObject(someRuns());
  object["status"]["runs"][1] = "not a run";
  keepShmProfile(object);
  auto read = profileRecommendation(object, someRuns().back().inputs);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().message, "status.runs[1] is not an object");
  json notAnObject = json::array({1, 2});
  keepShmProfile(notAnObject);
  EXPECT_EQ(notAnObject, json::array({1, 2}));
  EXPECT_FALSE(profileRecommendation(notAnObject, "x").ok());
}

}  // namespace
}  // namespace podshaper
