// What the webhook's ShmProfile watch costs: the heap of 10,000 profiles of 10 runs each,
// kept as its informer keeps them (keepShmProfile, then packed: kube::packObject), and the
// CPU of sizing one pod from its profile (the pod's workload and inputs, the lookup as
// kube::Informer::get does it, readShmProfile, recommend, the size and its words), beside
// admissions of the same pods sized by the formula alone and from the profiles.
//
//   shm_profile_cost [--profiles N] [--runs N] [--min-seconds S]
//
// The heap is the allocator's own count of bytes in use (metrics::heapBytes: tcmalloc's
// where the binary links it, as podshaper-webhook does), the measure of the webhook's
// podshaper_heap_bytes{state="in_use"} in docs/BENCHMARKS.md. The profiles are made as the
// operator writes them (shmProfileStatus; metadata with managedFields, as the API server
// sends them), each store filled event by event and measured alone; a read profile is kept
// beside them for comparison. CPU is the calling thread's; the pods of the profiles are the
// realistic pod's, each given a JobSet's labels. Exit status 1 when nothing was sized, or an
// admission was not sized from its profile.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/shm_profile.h"
#include "base/base64.h"
#include "base/checked.h"
#include "bench/bench_util.h"
#include "kube/store.h"
#include "metrics/heap.h"
#include "shaping/admission.h"

namespace {

using nlohmann::json;
namespace kube = podshaper::kube;
using podshaper::bench::threadCpuSeconds;

constexpr int64_t kNow = 1796223600;  // 2026-12-02T15:00:00Z
constexpr uint64_t kMiB = podshaper::kMiB;

std::string hex(std::mt19937_64& rng, int digits) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < digits; ++i) out += kDigits[rng() % 16];
  return out;
}

std::string uid(std::mt19937_64& rng) {
  return hex(rng, 8) + "-" + hex(rng, 4) + "-4" + hex(rng, 3) + "-8" + hex(rng, 3) + "-" + hex(rng, 12);
}

// Profile i: a JobSet's workers in one of 100 namespaces, `runs` runs of 8 ranks over the
// last days, the first third of other inputs than the pods' (`podInputs`), one died of a
// full /dev/shm.
json profileObject(std::mt19937_64& rng, int i, int runs, const std::string& podInputs) {
  const std::string ns = "team-" + std::to_string(i % 100);
  const std::string jobset = "llama-7b-pretrain-" + std::to_string(i);
  const std::string inputs[2] = {hex(rng, 8), podInputs};
  std::vector<podshaper::ProfileRun> list;
  for (int r = 0; r < runs; ++r) {
    podshaper::ProfileRun run;
    run.pod = jobset + "-workers-0-" + std::to_string(r % 4) + "-" + hex(rng, 5);
    run.podUID = uid(rng);
    run.run = 1 + r / 4;
    run.endedAt = kNow - (runs - r) * 7200 - static_cast<int64_t>(rng() % 3600);
    run.ranks = 8;
    run.sizeBytes = (16 + rng() % 48) * 1024 * kMiB;
    run.peakBytes = std::min<uint64_t>(run.sizeBytes, (2 + rng() % (1 << 20)) * 4096 * 8);
    run.end = r == runs / 2 ? podshaper::RunEnd::kShmExhausted : podshaper::RunEnd::kCompleted;
    run.inputs = inputs[r < runs / 3 ? 0 : 1];
    list.push_back(std::move(run));
  }
  podshaper::ProfileSettings settings;
  json status = podshaper::shmProfileStatus(list, settings, kNow);
  json managedFields = json::array(
      {{{"manager", "podshaper-operator"},
        {"operation", "Apply"},
        {"apiVersion", "podshaper.io/v1alpha1"},
        {"time", "2026-12-02T14:58:31Z"},
        {"fieldsType", "FieldsV1"},
        {"fieldsV1", {{"f:spec", {{"f:workload", json::object()}}}}}},
       {{"manager", "podshaper-operator"},
        {"operation", "Apply"},
        {"apiVersion", "podshaper.io/v1alpha1"},
        {"time", "2026-12-02T14:58:31Z"},
        {"fieldsType", "FieldsV1"},
        {"fieldsV1",
         {{"f:status",
           {{"f:inputs", json::object()},
            {"f:lastSize", json::object()},
            {"f:peak", json::object()},
            {"f:recommendation", json::object()},
            {"f:recommended", json::object()},
            {"f:runCount", json::object()},
            {"f:runs", json::object()}}}}},
        {"subresource", "status"}}});
  return {{"apiVersion", "podshaper.io/v1alpha1"},
          {"kind", "ShmProfile"},
          {"metadata",
           {{"name", "jobset." + jobset + ".workers"},
            {"namespace", ns},
            {"uid", uid(rng)},
            {"resourceVersion", std::to_string(100000 + i)},
            {"generation", 1},
            {"creationTimestamp", "2026-11-28T09:12:44Z"},
            {"labels", {{"app.kubernetes.io/managed-by", "podshaper-operator"}}},
            {"managedFields", std::move(managedFields)}}},
          {"spec", {{"workload", "JobSet " + jobset + ", replicated job workers"}}},
          {"status", std::move(status)}};
}

std::size_t heapInUse() {
  auto heap = podshaper::metrics::heapBytes();
  return heap ? heap->inUse : 0;
}

double mib(std::size_t bytes) { return static_cast<double>(bytes) / kMiB; }

// How a store keeps each profile: the object whole, its transform (keepShmProfile), that
// packed (kube::packObject: the webhook's informer, options.packed), or read once at its
// watch event (readShmProfile's ShmProfile, shared with each admission that reads it).
enum class Form { kWhole, kKept, kPacked };

struct Store {
  Form form = Form::kPacked;
  std::mutex mu;
  kube::ObjectStore objects;
  std::size_t heapBytes = 0;  // the store's, once filled
  std::size_t textBytes = 0;  // the profiles' JSON text as the API server sends it
  double fillSeconds = 0;     // CPU of each event's transform and store, its parse left out
};

// Fills the store event by event, as kube::Informer's handleEvent does.
void fill(Store& store, int profiles, int runs, const std::string& podInputs) {
  std::mt19937_64 rng(42);  // the same profiles in every store
  const std::size_t before = heapInUse();
  for (int i = 0; i < profiles; ++i) {
    kube::WatchEvent event{"ADDED", profileObject(rng, i, runs, podInputs)};
    store.textBytes += event.object.dump().size();
    const double start = threadCpuSeconds();
    if (store.form != Form::kWhole) podshaper::keepShmProfile(event.object);
    if (store.form == Form::kPacked) event.object = kube::packObject(event.object);
    if (!kube::applyWatchEvent(store.objects, event)) std::abort();
    store.fillSeconds += threadCpuSeconds() - start;
  }
  store.heapBytes = heapInUse() - before;
}

// kube::Informer::get: the stored value copied under the lock, unpacked outside it.
std::optional<json> get(Store& store, const std::string& key) {
  std::optional<json> stored;
  {
    std::lock_guard lock(store.mu);
    auto it = store.objects.find(key);
    if (it == store.objects.end()) return std::nullopt;
    stored = it->second;
  }
  auto object = kube::unpackObject(*stored);
  if (!object) std::abort();
  return std::move(*object);
}

// The realistic review, its pod made one of profile i's JobSet as the JobSet controller
// makes it.
json reviewOf(json review, int i) {
  json& pod = review["request"]["object"];
  const std::string jobset = "llama-7b-pretrain-" + std::to_string(i);
  review["request"]["namespace"] = "team-" + std::to_string(i % 100);
  pod["metadata"]["namespace"] = "team-" + std::to_string(i % 100);
  pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = jobset;
  pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] = "workers";
  pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] = jobset + "-workers-0";
  pod["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "batch/v1"},
                                                      {"kind", "Job"},
                                                      {"name", jobset + "-workers-0"},
                                                      {"uid", "0b1c2d3e"},
                                                      {"controller", true}}});
  return review;
}

using Work = std::function<void(std::size_t)>;

// CPU seconds an item of each work: work k's item i (over 0..items[k]-1 again and again)
// for `minSeconds`, the works taking turns chunk by chunk, each's median chunk of 50 items:
// what else runs on the machine weighs on them alike.
std::vector<double> perItem(const std::vector<Work>& works, const std::vector<std::size_t>& items, double minSeconds) {
  constexpr std::size_t kChunk = 50;
  std::vector<std::vector<double>> chunks(works.size());
  std::vector<std::size_t> next(works.size(), 0);
  const double start = threadCpuSeconds();
  do {
    for (std::size_t w = 0; w < works.size(); ++w) {
      const double chunk = threadCpuSeconds();
      for (std::size_t k = 0; k < kChunk; ++k, next[w] = (next[w] + 1) % items[w]) works[w](next[w]);
      chunks[w].push_back((threadCpuSeconds() - chunk) / kChunk);
    }
  } while (threadCpuSeconds() - start < minSeconds || chunks[0].size() < 5);
  std::vector<double> out;
  for (auto& c : chunks) {
    std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(c.size() / 2), c.end());
    out.push_back(c[c.size() / 2]);
  }
  return out;
}

// The steps of sizing a pod from its profile, in order.
enum class Step { kWorkload, kLookup, kRead, kRecommend };

// Sizing the pods of profiles taken in a shuffled order (a profile's bytes are not in cache
// when its next pod comes), the steps up to `last`. Each step's cost is the difference to
// the run that stops before it: a clock read per step would cost about as much as a step.
Work sizePods(Store& store, const std::vector<json>& pods, Step last, uint64_t& checksum) {
  auto order = std::make_shared<std::vector<std::size_t>>(pods.size());
  for (std::size_t i = 0; i < order->size(); ++i) (*order)[i] = i;
  std::shuffle(order->begin(), order->end(), std::mt19937(7));
  return [&store, &pods, last, &checksum, order](std::size_t i) {
    const json& pod = pods[(*order)[i]];  // its metadata: all that its workload and inputs read
    auto workload = podshaper::workloadOf(pod);
    const std::string inputs = podshaper::declaredInputs(pod);
    if (!workload || !*workload) std::abort();
    const std::string key = pod["metadata"]["namespace"].get<std::string>() + "/" + (*workload)->profile;
    checksum += key.size() + inputs.size();
    if (last == Step::kWorkload) return;
    std::optional<json> object = get(store, key);
    if (!object) std::abort();
    if (last == Step::kLookup) return;
    auto r = podshaper::profileRecommendation(*object, inputs);
    if (!r || !*r) std::abort();
    if (last == Step::kRead) return;
    const uint64_t bytes = (*r)->bytesFor(8);
    checksum += bytes + (*r)->words(8, bytes, kNow).size();
  };
}

// Admissions of the profiles' pods in a shuffled order, with the scratch a webhook thread
// keeps between reviews; their /dev/shm sized from the store's profiles (ShmProfileLookup,
// as the webhook's Informer::get) where `store` is given, else by the formula alone.
struct Admissions {
  std::shared_ptr<const std::vector<std::string>> bodies;
  std::vector<std::size_t> order;
  Store* store = nullptr;
  podshaper::Config config;
  podshaper::ClusterView view = podshaper::bench::gpuCluster();
  podshaper::AdmissionScratch scratch;

  Admissions(std::shared_ptr<const std::vector<std::string>> all, Store* from) : bodies(std::move(all)), store(from) {
    for (int t = 0; t < 100; ++t) view.namespaceLabels["team-" + std::to_string(t)] = {};
    for (std::size_t i = 0; i < bodies->size(); ++i) order.push_back(i);
    std::shuffle(order.begin(), order.end(), std::mt19937(11));
  }
  podshaper::AdmissionDecision operator()(std::size_t i) {
    podshaper::ShmProfileLookup lookup;
    if (store != nullptr) {
      lookup = [this](std::string_view ns, std::string_view name) {
        return get(*store, std::string(ns) + "/" + std::string(name));
      };
    }
    auto decision = podshaper::admit(scratch, (*bodies)[order[i]], config, &view, "podshaper-webhook/bench", {},
                                     lookup, kNow);
    if (!decision) std::abort();
    return std::move(*decision);
  }
};

Work workOf(std::shared_ptr<Admissions> admissions) {
  return [admissions](std::size_t i) { (*admissions)(i); };
}

}  // namespace

int main(int argc, char** argv) {
  int profiles = 10000, runs = 10;
  double minSeconds = 1.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--profiles" && i + 1 < argc) {
      profiles = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::clamp(std::atoi(argv[++i]), 1, 1000);
    } else if (a == "--min-seconds" && i + 1 < argc) {
      minSeconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: shm_profile_cost [--profiles N] [--runs N] [--min-seconds S]\n");
      return 2;
    }
  }
  const std::string body = podshaper::bench::readFile(PODSHAPER_BENCH_DIR "/inputs/realistic-pod.json");
  const json review = json::parse(body, nullptr, false);
  if (review.is_discarded()) {
    std::fprintf(stderr, "shm_profile_cost: cannot read %s\n", PODSHAPER_BENCH_DIR "/inputs/realistic-pod.json");
    return 2;
  }
  std::printf("%d ShmProfiles of %d runs (%s)\n", profiles, runs,
              podshaper::metrics::heapBytes() ? "heap: the allocator's bytes in use" : "no heap count here");
  auto bodies = std::make_shared<std::vector<std::string>>();
  std::vector<json> pods;  // their metadata
  for (int i = 0; i < profiles; ++i) {
    json one = reviewOf(review, i);
    bodies->push_back(one.dump());
    pods.push_back({{"metadata", std::move(one["request"]["object"]["metadata"])}});
  }
  const std::string podInputs = podshaper::declaredInputs(pods.front());
  const auto byFormula = std::make_shared<Admissions>(bodies, nullptr);
  uint64_t checksum = 0;
  struct Row {
    Form form;
    const char* what;
  };
  for (const Row& row : {Row{Form::kWhole, "whole objects"}, Row{Form::kKept, "kept (keepShmProfile)"},
                         Row{Form::kPacked, "kept and packed (the webhook's informer)"}}) {
    Store store;
    store.form = row.form;
    fill(store, profiles, runs, podInputs);
    std::printf("  %-41s heap %7.2f MiB, %5zu bytes a profile (JSON text %zu); %5.1f µs a watch event\n", row.what,
                mib(store.heapBytes), store.heapBytes / profiles, store.textBytes / profiles,
                store.fillSeconds * 1e6 / profiles);
    if (row.form != Form::kPacked) continue;
    const bool packed = row.form == Form::kPacked;
    // Each step's run and admissions, in turn; from the packed store an admission that reads it.
    std::vector<Work> works;
    for (Step step : {Step::kWorkload, Step::kLookup, Step::kRead, Step::kRecommend}) {
      works.push_back(sizePods(store, pods, step, checksum));
    }
    works.push_back(workOf(byFormula));
    const std::size_t n = pods.size();
    std::vector<std::size_t> items = {n, n, n, n, n};
    std::shared_ptr<Admissions> fromProfile;
    if (packed) {
      fromProfile = std::make_shared<Admissions>(bodies, &store);
      const json answer = (*fromProfile)(0).review["response"];
      auto patch = podshaper::base64Decode(answer.value("patch", std::string()));
      if (!patch || patch->find("measured: ") == std::string::npos) {
        std::fprintf(stderr, "shm_profile_cost: the admission was not sized from its profile\n");
        return 1;
      }
      works.push_back(workOf(fromProfile));
      items.push_back(n);
    }
    std::vector<double> upTo = perItem(works, items, minSeconds);
    const double admission = upTo[4];
    char read[48] = "";
    if (packed) std::snprintf(read, sizeof read, "profileRecommendation %.1f, ", (upTo[2] - upTo[1]) * 1e6);
    std::printf("    sizing a pod from it: %.1f µs against an admission's %.1f µs: %.2fx\n"
                "      its steps: workload and inputs %.1f, %s %.1f, %srecommend, size and words %.1f\n",
                upTo[3] * 1e6, admission * 1e6, upTo[3] / admission, upTo[0] * 1e6,
                packed ? "lookup and unpack" : "lookup", (upTo[1] - upTo[0]) * 1e6, read, (upTo[3] - upTo[2]) * 1e6);
    if (packed) {
      std::printf("    an admission sized from it (admit with the store's lookup): %.1f µs, %.2fx the formula's\n",
                  upTo[5] * 1e6, upTo[5] / admission);
    }
  }
  return checksum == 0 ? 1 : 0;
}
