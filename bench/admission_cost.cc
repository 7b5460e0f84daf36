// What one admission costs for the largest and most hostile bodies the API server can
// send (up to its 3 MiB request limit), next to an ordinary pod and an ordinary pod
// padded to the same size (what parsing and diffing that many bytes costs anyway).
// CPU time of the calling thread, in process: decode, shape, diff, encode.
//
//   admission_cost [--min-seconds S] [--json]
//
// The floor for a body is parsing it (json::parse), what any JSON webhook pays to read
// it. An ordinary pod costs k such parses (copy, shape, diff, encode). Exit status 1 when
// a hostile case costs more than 2k of its own parses (podshaper's work grows with the
// bytes, not with what they say) and more than 10 ordinary pods (a small body that asks
// much, 64 GPU containers), or more than 250 ms (the webhook's timeout is 5 s, its
// failurePolicy Fail).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/names.h"
#include "bench/bench_util.h"
#include "shaping/admission.h"

namespace {

using nlohmann::json;
using podshaper::bench::readFile;
using podshaper::bench::threadCpuSeconds;
using podshaper::names::kGpuResource;

struct Case {
  std::string name;
  std::string what;
  std::string body;
  bool hostile = true;
};

json& podOf(json& review) { return review["request"]["object"]; }
json& firstContainer(json& review) { return podOf(review)["spec"]["containers"][0]; }

// The ordinary review with one inert env value that brings the body to `bytes`.
std::string padded(json review, std::size_t bytes) {
  const std::size_t now = review.dump().size();
  const std::size_t pad = bytes > now + 64 ? bytes - now - 64 : 0;
  firstContainer(review)["env"].push_back({{"name", "PADDING"}, {"value", std::string(pad, 'x')}});
  return review.dump();
}

json selectorTerms(std::size_t terms, std::size_t expressions) {
  json list = json::array();
  for (std::size_t i = 0; i < terms; ++i) {
    json exprs = json::array();
    for (std::size_t e = 0; e < expressions; ++e) {
      exprs.push_back({{"key", "k" + std::to_string(e)}, {"operator", "In"}, {"values", {"z" + std::to_string(i)}}});
    }
    list.push_back({{"matchExpressions", exprs}});
  }
  return list;
}

json gpuContainers(int n) {
  json containers = json::array();
  for (int i = 0; i < n; ++i) {
    containers.push_back({{"name", "c" + std::to_string(i)},
                          {"image", "x"},
                          {"resources", {{"limits", {{std::string(kGpuResource), "1"}, {"memory", "1Gi"}}}}}});
  }
  return containers;
}

std::vector<Case> cases(const json& ordinary) {
  constexpr std::size_t kLimit = 3 * 1024 * 1024 - 4096;  // the API server's request body limit, less the envelope
  std::vector<Case> out;
  out.push_back({"ordinary", "an 8-GPU training pod as the API server sends it", ordinary.dump(), false});
  out.push_back({"ordinary-3MiB", "the same pod with a 3 MiB inert env value", padded(ordinary, kLimit), false});

  // The NRI ulimit annotation podshaper reads and extends, as YAML: past the API server's
  // annotation limit, and within it.
  for (const auto& [name, bytes, what] :
       {std::tuple{"ulimits-2.5MB", 2500000, "ulimits.noderesource.dev/container.trainer of 2.5 MB (42,000 entries)"},
        std::tuple{"ulimits-250KB", 250000, "ulimits.noderesource.dev/container.trainer of 250 KB (4,200 entries)"},
        std::tuple{"ulimits-4KiB", 4050, "ulimits.noderesource.dev/container.trainer of 4 KiB (the most podshaper reads)"}}) {
    json r = ordinary;
    std::string yaml;
    while (yaml.size() < static_cast<std::size_t>(bytes)) yaml += "- type: RLIMIT_NOFILE\n  soft: 1048576\n  hard: 1048576\n";
    podOf(r)["metadata"]["annotations"][std::string(podshaper::names::kUlimitAnnotationPrefix) + "trainer"] = yaml;
    out.push_back({name, what, r.dump()});
  }
  // Required node affinity podshaper adds its requirements to, term by term.
  for (const auto& [name, terms, expressions, what] :
       {std::tuple{"terms-10000", 10000, 1, "10,000 nodeSelectorTerms"},
        std::tuple{"terms-64x8", 64, 8, "64 nodeSelectorTerms of 8 requirements (near the 32 KiB podshaper takes)"}}) {
    json r = ordinary;
    podOf(r)["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"] = selectorTerms(terms, expressions);
    out.push_back({name, what, r.dump()});
  }
  // Every container a GPU container: one mount, env, capability and NRI annotation each.
  for (const auto& [name, n, what] : {std::tuple{"gpu-ctrs-11000", 11000, "11,000 GPU containers"},
                                      std::tuple{"gpu-ctrs-64", 64, "64 GPU containers (the most podshaper takes)"}}) {
    json r = ordinary;
    podOf(r)["spec"]["containers"] = gpuContainers(n);
    podOf(r)["metadata"]["annotations"]["podshaper.io/placement"] = "shared";
    out.push_back({name, what, r.dump()});
  }
  {  // A valid batch-shape that goes into the formula annotation.
    json r = ordinary;
    std::string shape = "32";
    while (shape.size() < 200000) shape += "x1";
    podOf(r)["metadata"]["annotations"]["podshaper.io/batch-shape"] = shape;
    out.push_back({"batch-shape", "podshaper.io/batch-shape of 200 KB (100,000 dimensions)", r.dump()});
  }
  {  // $(NAME) in command words, expanded from the env as the kubelet does.
    json r = ordinary;
    std::string args = "--nnodes=";
    for (int i = 0; i < 20000; ++i) args += "$(BIG)";
    firstContainer(r)["env"] = json::array({{{"name", "BIG"}, {"value", std::string(100000, 'x')}}});
    firstContainer(r)["args"] = json::array({args});
    out.push_back({"env-expansion", "args of 20,000 $(BIG), BIG of 100 KB (2 GB expanded)", r.dump()});
  }
  {  // env podshaper searches for PET_NPROC_PER_NODE and NCCL's switches.
    json r = ordinary;
    json env = json::array();
    for (int i = 0; i < 60000; ++i) env.push_back({{"name", "V" + std::to_string(i)}, {"value", "1"}});
    firstContainer(r)["env"] = env;
    out.push_back({"env", "60,000 env entries in the GPU container", r.dump()});
    // ...and args of 50,000 $(NAME) that none of them sets: each one looked up.
    std::string args;
    for (int i = 0; i < 50000; ++i) args += "$(NO)";
    firstContainer(r)["args"] = json::array({args});
    out.push_back({"env-lookups", "60,000 env entries, args of 50,000 $(NO)", r.dump()});
  }
  {  // Mounts and volumes podshaper looks through for a /dev/shm of the user's.
    json r = ordinary;
    json mounts = json::array();
    json volumes = json::array();
    for (int i = 0; i < 20000; ++i) {
      mounts.push_back({{"name", "v" + std::to_string(i)}, {"mountPath", "/data/" + std::to_string(i)}});
      volumes.push_back({{"name", "v" + std::to_string(i)}, {"emptyDir", json::object()}});
    }
    firstContainer(r)["volumeMounts"] = mounts;
    podOf(r)["spec"]["volumes"] = volumes;
    out.push_back({"mounts", "20,000 volumes and mounts", r.dump()});
  }
  {  // Many small annotations beside podshaper's.
    json r = ordinary;
    for (int i = 0; i < 40000; ++i) podOf(r)["metadata"]["annotations"]["example.com/a" + std::to_string(i)] = "v";
    out.push_back({"annotations", "40,000 annotations", r.dump()});
  }
  {  // Many resource claims, none of them GPUs podshaper knows of.
    json r = ordinary;
    json claims = json::array();
    json uses = json::array();
    for (int i = 0; i < 20000; ++i) {
      claims.push_back({{"name", "c" + std::to_string(i)}, {"resourceClaimName", "claim-" + std::to_string(i)}});
      uses.push_back({{"name", "c" + std::to_string(i)}});
    }
    podOf(r)["spec"]["resourceClaims"] = claims;
    firstContainer(r)["resources"]["claims"] = uses;
    out.push_back({"claims", "20,000 resource claims used by the GPU container", r.dump()});
  }
  for (Case& c : out) {
    if (c.body.size() > kLimit + 4096) c.what += " (over the API server's 3 MiB: not sendable)";
  }
  return out;
}

struct Measured {
  double cpuMs = 0;
  double parseMs = 0;  // json::parse of the same body: what reading it costs any JSON webhook
  std::size_t responseBytes = 0;
  std::string decision;
};

Measured measure(const Case& c, const podshaper::Config& config, const podshaper::ClusterView& cluster,
                 double minSeconds) {
  Measured m;
  int runs = 0;
  podshaper::AdmissionScratch scratch;  // as a webhook thread keeps it between reviews
  const double start = threadCpuSeconds();
  double spent = 0;
  do {
    auto decision = podshaper::admit(scratch, c.body, config, &cluster, "podshaper-webhook/bench");
    std::string response = decision ? decision->body() : decision.error().message;
    m.responseBytes = response.size();
    if (runs == 0) {
      if (!decision) {
        m.decision = "error: " + decision.error().message;
      } else {
        const json& r = decision->review["response"];
        m.decision = r.value("allowed", false) ? (r.contains("patch") ? "allowed, patched" : "allowed")
                                               : "denied: " + r["status"].value("message", std::string());
      }
      if (m.decision.size() > 150) m.decision = m.decision.substr(0, 150) + "…";
    }
    ++runs;
    spent = threadCpuSeconds() - start;
  } while (spent < minSeconds || runs < 3);
  m.cpuMs = spent * 1000 / runs;
  runs = 0;
  const double parseStart = threadCpuSeconds();
  do {
    json parsed = json::parse(c.body, nullptr, false);
    ++runs;
    spent = threadCpuSeconds() - parseStart;
  } while (spent < minSeconds / 2 || runs < 3);
  m.parseMs = spent * 1000 / runs;
  return m;
}

podshaper::ClusterView cluster() {
  podshaper::ClusterView view = podshaper::bench::gpuCluster();
  // One node of 64 GPUs, so that a pod of 64 one-GPU containers has somewhere to go.
  podshaper::Node big = view.nodes.front();
  big.name = "big-64";
  big.allocatableGpus = 64;
  big.labels.set(std::string(podshaper::names::kGpuCount), "64");
  view.nodes.push_back(big);
  return view;
}

}  // namespace

int main(int argc, char** argv) {
  double minSeconds = 1.0;
  bool asJson = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--min-seconds" && i + 1 < argc) {
      minSeconds = std::stod(argv[++i]);
    } else if (a == "--json") {
      asJson = true;
    } else {
      std::fprintf(stderr, "usage: admission_cost [--min-seconds S] [--json]\n");
      return 2;
    }
  }
  const std::string text = readFile(PODSHAPER_BENCH_DIR "/inputs/realistic-pod.json");
  const json ordinary = json::parse(text, nullptr, false);
  if (ordinary.is_discarded()) {
    std::fprintf(stderr, "admission_cost: cannot read %s\n", PODSHAPER_BENCH_DIR "/inputs/realistic-pod.json");
    return 2;
  }
  const podshaper::Config config;
  const podshaper::ClusterView view = cluster();
  const std::vector<Case> all = cases(ordinary);
  std::vector<Measured> results;
  for (const Case& c : all) results.push_back(measure(c, config, view, minSeconds));

  // The floor of a body: parsing it. An ordinary pod costs k parses; a hostile body
  // may cost at most 2k of its own parses.
  const double ordinaryMs = results[0].cpuMs;
  const double ordinaryParses = results[0].cpuMs / results[0].parseMs;
  constexpr double kAbsoluteMs = 250;
  constexpr double kOrdinaryMultiple = 10;  // a small body that asks for much: 64 GPU containers
  bool over = false;
  json rows = json::array();
  if (!asJson) {
    std::printf("%-15s %8s %9s %9s %8s %8s %7s  %s\n", "case", "body", "response", "CPU ms", "parse ms",
                "×parse", "×ord.", "decision");
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    const Measured& m = results[i];
    const double parses = m.cpuMs / m.parseMs;
    const bool bad =
        c.hostile && ((parses > 2 * ordinaryParses && m.cpuMs > kOrdinaryMultiple * ordinaryMs) || m.cpuMs > kAbsoluteMs);
    over = over || bad;
    if (asJson) {
      rows.push_back({{"case", c.name}, {"what", c.what}, {"body_bytes", c.body.size()},
                      {"response_bytes", m.responseBytes}, {"cpu_ms", m.cpuMs}, {"parse_ms", m.parseMs},
                      {"x_parse", parses}, {"x_ordinary", m.cpuMs / ordinaryMs}, {"over_bound", bad},
                      {"decision", m.decision}});
    } else {
      std::printf("%-15s %8zu %9zu %9.3f %8.3f %7.1f%s %7.0f  %s\n", c.name.c_str(), c.body.size(), m.responseBytes,
                  m.cpuMs, m.parseMs, parses, bad ? "!" : " ", m.cpuMs / ordinaryMs, m.decision.c_str());
    }
  }
  if (asJson) {
    std::printf("%s\n", json{{"cases", rows}, {"bound_x_parse", 2 * ordinaryParses}, {"bound_x_ordinary", kOrdinaryMultiple}, {"bound_ms", kAbsoluteMs}}.dump(2).c_str());
  } else {
    std::printf("bound: ≤ %.1f× parsing the body (twice the ordinary pod's %.1f) or ≤ %.0f× the ordinary pod, and "
                "≤ %.0f ms; ! marks a case over it\n",
                2 * ordinaryParses, ordinaryParses, kOrdinaryMultiple, kAbsoluteMs);
  }
  return over ? 1 : 0;
}
