#include "judging/verdict.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "api/names.h"
#include "api/topology.h"
#include "base/text.h"
#include "base/timefmt.h"

namespace podshaper {
namespace {

using nlohmann::json;

std::string pairName(const GpuPair& p) { return "GPU" + std::to_string(p.a) + "-GPU" + std::to_string(p.b); }

// "GPU0-GPU2, GPU0-GPU3 and GPU1-GPU2"; long lists end with "and N more".
std::string pairList(const std::vector<const GpuPair*>& pairs, std::size_t shown = 12) {
  std::ostringstream out;
  const std::size_t n = std::min(pairs.size(), shown);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out << (i + 1 == n && pairs.size() <= shown ? " and " : ", ");
    out << pairName(*pairs[i]);
  }
  if (pairs.size() > shown) out << " and " << pairs.size() - shown << " more";
  return out.str();
}

std::string bytesInWords(uint64_t bytes) {
  if (bytes % (1ULL << 30) == 0 && bytes > 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes % (1ULL << 20) == 0 && bytes > 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes % (1ULL << 10) == 0 && bytes > 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

// RLIMIT_MEMLOCK as a report says it: "unlimited", or "4 MiB".
std::string limitInWords(const std::optional<uint64_t>& bytes) {
  return bytes ? bytesInWords(*bytes) : std::string(names::kMemlockUnlimited);
}

// The first sentence of what podshaper-shm says (to a ". " outside parentheses), at most
// 300 bytes: what it says of the node, the same from one retry to the next.
std::string firstSentence(const std::string& words) {
  int depth = 0;
  std::size_t end = words.size();
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (words[i] == '(') ++depth;
    if (words[i] == ')' && depth > 0) --depth;
    if (words[i] == '.' && depth == 0 && (i + 1 == words.size() || words[i + 1] == ' ')) {
      end = i;
      break;
    }
  }
  return cutUtf8(words.substr(0, end), 300);
}

// The held pods, each with its held containers: "ml/a (container train), ml/b (containers
// x and y) and 2 more"; `pods` is how many there are.
std::string heldPodsInWords(const std::vector<MemlockHeld>& held, std::size_t& pods) {
  std::vector<std::string> items;
  for (std::size_t i = 0; i < held.size();) {
    std::size_t j = i;
    std::vector<std::string> containers;
    for (; j < held.size() && held[j].pod == held[i].pod; ++j) containers.push_back(held[j].container);
    const std::string last = containers.back();
    containers.pop_back();
    const std::string others = containers.empty() ? "container " : "containers " + joined(containers) + " and ";
    items.push_back(held[i].pod + " (" + others + last + ")");
    i = j;
  }
  pods = items.size();
  return someOf(items, 3);
}

std::string durationInWords(long long seconds) {
  if (seconds % 3600 == 0) return std::to_string(seconds / 3600) + "h";
  if (seconds % 60 == 0) return std::to_string(seconds / 60) + "m";
  return std::to_string(seconds) + "s";
}

std::string gbps(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", v);
  return buf;
}

std::string policyNames(const std::vector<std::string>& names) {
  std::string out = names.size() == 1 ? "TopologyPolicy " : "TopologyPolicies ";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

// One unmet requirement: the reason Validated carries when it is the first, and its words.
struct Failure {
  std::string reason, words;
};

class Judge {
 public:
  Judge(const Topology& t, const Node* node, const EffectiveRequirements& eff, long long now,
        const std::vector<MemlockHeld>& held)
      : t_(t), node_(node), r_(eff.requirements), now_(now), held_(held) {}

  void summarize(Verdict& v) const {
    v.gpus = static_cast<long long>(t_.gpus.size());
    std::size_t nv = 0, ok = 0, unknown = 0;
    for (const auto& p : t_.pairs) {
      if (parseLinkClass(p.link) == LinkClass::NVLink) ++nv;
      if (p.p2p.read == "OK") ++ok;
      else if (p.p2p.read == "U") ++unknown;
    }
    const std::size_t n = t_.pairs.size();
    v.interconnect = n == 0 ? "none" : nv == n ? "nvlink" : nv == 0 ? "pcie" : "mixed";
    unknown += missingPairs();
    if (ok == n && unknown == 0) v.p2p = std::string(names::kP2PAll);
    else if (ok + unknown == n + missingPairs()) v.p2p = "unknown";
    else v.p2p = ok > 0 ? "partial" : "none";
    v.memlock = notGranted()   ? std::string(names::kMemlockNotGranted)
                : notApplied() ? std::string(names::kMemlockNotApplied)
                               : MemlockLimit{t_.host.memlockBytes}.text();
  }

  // The runtime could not start the agent's memlock-probe container with the memlock asked.
  bool notGranted() const { return t_.host.memlockProbe && !t_.host.memlockProbe->granted && !probeHeld(); }
  // podshaper-shm holds the agent's memlock-probe back, as it holds shaped pods' containers:
  // the runtime would start it without its memlock (a node rebooting whose ulimit plugin
  // registers after the agent's pod is created). It starts by itself once the node applies it.
  bool probeHeld() const {
    return t_.host.memlockProbe && !t_.host.memlockProbe->granted &&
           t_.host.memlockProbe->message.find(names::kMemlockNotAppliedMarker) != std::string::npos;
  }
  // The agent's memlock-probe started, with another limit than it asked: the runtime did not
  // apply its annotation.
  bool probeGotOther() const {
    return t_.host.memlockProbe && t_.host.memlockProbe->granted &&
           t_.host.memlockProbe->requested.bytes != t_.host.memlockBytes;
  }
  // The runtime starts containers without the memlock their annotation asks: podshaper-shm
  // holds shaped pods' containers back here, or the probe got another limit. A probe that
  // could not start at all says more (notGranted).
  bool notApplied() const { return !notGranted() && (!held_.empty() || probeGotOther() || probeHeld()); }

  // Pairs a report of this many GPUs should list but does not.
  std::size_t missingPairs() const {
    const std::size_t g = t_.gpus.size();
    const std::size_t expected = g < 2 ? 0 : g * (g - 1) / 2;
    return expected > t_.pairs.size() ? expected - t_.pairs.size() : 0;
  }

  Condition p2p(std::vector<Failure>& failures) const {
    std::vector<const GpuPair*> without, unknown;
    for (const auto& p : t_.pairs) {
      if (p.p2p.read == "U") unknown.push_back(&p);
      else if (p.p2p.read != "OK") without.push_back(&p);
    }
    const std::size_t n = t_.pairs.size();
    Condition c{conditions::kP2PComplete, "True", "", ""};
    if (const std::size_t missing = missingPairs(); missing > 0 && without.empty()) {
      c.status = "Unknown";
      c.reason = "P2PNotMeasured";
      c.message = "The report lists " + std::to_string(n) + " of the " + std::to_string(n + missing) +
                  " GPU pairs of " + counted(t_.gpus.size(), "GPU") +
                  ", so peer-to-peer access between the others is unknown and NCCL may fall back to shared "
                  "memory (/dev/shm) there.";
      if (r_.requireP2PAllPairs) {
        failures.push_back({c.reason, "the report lists only " + std::to_string(n) + " of " +
                                          std::to_string(n + missing) + " GPU pairs"});
      }
    } else if (n == 0) {
      c.reason = "NoGPUPairs";
      c.message = "The node has fewer than two GPUs, so there is no GPU pair to connect.";
    } else if (!without.empty()) {
      c.status = "False";
      c.reason = "P2PUnavailable";
      c.message = std::to_string(without.size()) + " of " + counted(n, "GPU pair") +
                  " cannot read each other's memory directly (no peer-to-peer access): " + pairList(without) +
                  ". NCCL falls back to shared memory (/dev/shm) between those GPUs, which is slower, and "
                  "its SHM transport keeps its buffers there, so podshaper sizes training pods for nodes "
                  "like this one with the SHM-transport NCCL /dev/shm reserve.";
      if (r_.requireP2PAllPairs) {
        failures.push_back({c.reason, std::to_string(without.size()) + " of " + counted(n, "GPU pair") +
                                          " lack peer-to-peer access (" + pairList(without, 4) + ")"});
      }
    } else if (!unknown.empty()) {
      c.status = "Unknown";
      c.reason = "P2PNotMeasured";
      c.message = "The agent could not tell whether " + std::to_string(unknown.size()) + " of " +
                  counted(n, "GPU pair") + " can read each other's memory directly (" + pairList(unknown, 4) +
                  "), so NCCL may fall back to shared memory (/dev/shm) there.";
      if (r_.requireP2PAllPairs) {
        failures.push_back({c.reason, "peer-to-peer access is not measured for " +
                                          std::to_string(unknown.size()) + " of " + counted(n, "GPU pair")});
      }
    } else {
      c.reason = "AllPairsP2P";
      c.message = "All " + counted(n, "GPU pair") +
                  " read each other's memory directly (peer-to-peer), so NCCL moves data from GPU to GPU "
                  "without going through host memory.";
    }
    return c;
  }

  Condition memlock(std::vector<Failure>& failures) const {
    Condition c{conditions::kMemlockUnlimited, "True", "Unlimited",
                "Containers on this node may lock unlimited memory, as RDMA (InfiniBand, EFA, GPUDirect) "
                "needs to register its buffers."};
    if (notGranted()) {
      const MemlockProbe& probe = *t_.host.memlockProbe;
      const std::string asked = "RLIMIT_MEMLOCK=" + (probe.requested.bytes ? bytesInWords(*probe.requested.bytes)
                                                                           : probe.requested.text());
      c.status = "False";
      c.reason = "MemlockNotGranted";
      c.message = "The container runtime on this node could not start a container with " + asked +
                  " (the agent's memlock-probe container, which asks for what the webhook gives training pods)" +
                  (probe.message.empty() ? std::string(": it gave no reason")
                                         : ": \"" + probe.message + "\"") +
                  ". Pods shaped by podshaper ask for the same limit, so they would never start here; they are "
                  "kept off this node (label " + std::string(names::kMemlock) + "=" +
                  std::string(names::kMemlockNotGranted) + "). To fix it, run a container runtime that may raise "
                  "the limit (containerd or CRI-O with the NRI ulimit-adjuster plugin and CAP_SYS_RESOURCE, or a "
                  "higher LimitMEMLOCK in its systemd unit), or set the webhook's memlock (and the agent's "
                  "memlock-probe with it) to what this node can grant.";
      // Whatever the policies ask: a node where shaped pods cannot start is of no use to them.
      failures.push_back({c.reason, "the container runtime could not start a container with " + asked +
                                        ", so pods shaped by podshaper would never start here"});
    } else if (notApplied()) {
      c.status = "False";
      c.reason = "MemlockNotApplied";
      c.message = notAppliedMessage();
      // As MemlockNotGranted: whatever the policies ask, shaped pods do not start here now.
      failures.push_back({c.reason, notAppliedWords()});
    } else if (t_.host.memlockBytes) {
      c.status = "False";
      c.reason = "MemlockLimited";
      c.message = "Containers on this node may lock only " + bytesInWords(*t_.host.memlockBytes) +
                  " of memory (RLIMIT_MEMLOCK): NCCL over InfiniBand or EFA and GPUDirect RDMA fail to "
                  "register buffers beyond that. Install the NRI ulimit-adjuster plugin in the container "
                  "runtime, or raise its default memlock limit.";
      if (r_.requireMemlockUnlimited) {
        failures.push_back({c.reason, "containers may lock only " + bytesInWords(*t_.host.memlockBytes) +
                                          " of memory, not unlimited"});
      }
    }
    return c;
  }

  // The memlock asked, "RLIMIT_MEMLOCK=4 MiB", as the probe asks what shaped pods ask; empty
  // without a probe.
  std::string memlockAsked() const {
    const auto& probe = t_.host.memlockProbe;
    return probe ? "RLIMIT_MEMLOCK=" + limitInWords(probe->requested.bytes) : std::string();
  }

  std::string notAppliedMessage() const {
    std::string m = "The container runtime on this node does not apply the memlock podshaper asks for: ";
    if (probeGotOther()) {
      m += "the agent's memlock-probe container asked for " + memlockAsked() + " (its " +
           std::string(names::kUlimitAnnotationPrefix) + std::string(names::kMemlockProbeContainer) +
           " annotation, as shaped pods ask) and started with " + limitInWords(t_.host.memlockBytes) + ".";
    } else if (probeHeld() && held_.empty()) {
      m += "the agent's memlock-probe container asks for " + memlockAsked() + " (its " +
           std::string(names::kUlimitAnnotationPrefix) + std::string(names::kMemlockProbeContainer) +
           " annotation, as shaped pods ask) and would start with another limit.";
    } else {
      const std::string annotation = std::string(names::kUlimitAnnotationPrefix) + "<container> annotation";
      m += "containers of shaped pods asking for " +
           (memlockAsked().empty() ? "the RLIMIT_MEMLOCK of their " + annotation
                                   : memlockAsked() + " (their " + annotation + ")") +
           " would start with the runtime's default instead.";
    }
    m += " podshaper-shm holds back the containers of shaped pods until the node applies it";
    if (!held_.empty()) {
      std::size_t pods = 0;
      const std::string list = heldPodsInWords(held_, pods);
      m += "; " + counted(pods, "pod") + (pods == 1 ? " waits" : " wait") + " here: " + list +
           ". podshaper-shm says of " + held_.front().pod + ": \"" + firstSentence(held_.front().words) + "\"";
    }
    m += ". Pods shaped by podshaper are kept off this node meanwhile (label " + std::string(names::kMemlock) + "=" +
         std::string(names::kMemlockNotApplied) + "). To fix it, get the NRI ulimit-adjuster plugin of the node's "
         "container runtime running again (crashed or restarting: its log and containerd's on the node say why)";
    if (!held_.empty()) m += "; the held containers then start by themselves";
    if (probeHeld()) m += "; the agent's held memlock-probe then starts by itself";
    if (probeGotOther()) {
      m += "; then delete the podshaper-agent pod on this node, so that its memlock-probe asks again as it starts";
    }
    return m + ". The node is validated again once no container is held here and the agent's memlock-probe got "
               "what it asked.";
  }

  std::string notAppliedWords() const {
    std::string w = "the container runtime does not apply the memlock shaped pods ask";
    if (!memlockAsked().empty()) w += " (" + memlockAsked() + ")";
    if (!held_.empty()) {
      std::size_t pods = 0;
      heldPodsInWords(held_, pods);
      w += ", so podshaper-shm holds back " + counted(pods, "shaped pod") + " here";
    }
    if (probeGotOther()) {
      w += (held_.empty() ? ": " : " and ") + std::string("the agent's memlock-probe got ") +
           limitInWords(t_.host.memlockBytes);
    }
    if (probeHeld()) w += (held_.empty() ? ": " : " and ") + std::string("the agent's memlock-probe is held back");
    return w;
  }

  Condition gpuCount(std::vector<Failure>& failures) const {
    Condition c{conditions::kGPUCountMatchesNode, "True", "CountMatches", ""};
    const std::size_t found = t_.gpus.size();
    if (node_ == nullptr) {
      c.status = "False";
      c.reason = "NodeNotFound";
      c.message = "No Node of this name exists. A report is deleted with its Node; if this one stays, "
                  "delete it by hand (kubectl delete gtr <name>).";
      failures.push_back({c.reason, "no Node of this name exists"});
    } else if (found == 0) {
      c.status = "False";
      c.reason = "NoGPUs";
      c.message = "The agent found no GPU on this node (no NVIDIA driver, or no GPU visible to the agent's "
                  "container: is it run with the NVIDIA container runtime and NVIDIA_VISIBLE_DEVICES=all?).";
      failures.push_back({c.reason, "the agent found no GPU"});
    } else if (!node_->allocatableGpus) {
      c.status = "False";
      c.reason = "NoGPUsAllocatable";
      c.message = "The agent found " + counted(found, "GPU") + " but the Node lists no " +
                  std::string(names::kGpuResource) + " at all: is the NVIDIA device plugin running there?";
      failures.push_back({c.reason, "the Node lists no " + std::string(names::kGpuResource)});
    } else if (*node_->allocatableGpus != found) {
      c.status = "False";
      c.reason = "CountMismatch";
      c.message = "The agent found " + counted(found, "GPU") + " but the Node offers " +
                  std::to_string(*node_->allocatableGpus) + " to pods (" + std::string(names::kGpuResource) +
                  " allocatable): the device plugin may have marked a GPU unhealthy, or it shares GPUs "
                  "(time-slicing, MIG), which node-exclusive training does not expect.";
      failures.push_back({c.reason, "the agent found " + counted(found, "GPU") + ", the Node offers " +
                                        std::to_string(*node_->allocatableGpus)});
    } else {
      c.message = "The agent found " + counted(found, "GPU") + " and the Node offers " + std::to_string(found) +
                  " to pods (" + std::string(names::kGpuResource) + " allocatable).";
    }
    return c;
  }

  Condition fresh(const json& spec, std::vector<Failure>& failures, std::optional<long long>& staleAt) const {
    const long long maxAge = r_.maxReportAgeSeconds.value_or(kDefaultMaxReportAgeSeconds);
    Condition c{conditions::kFresh, "True", "ReportCurrent",
                "The agent has reported within the last " + durationInWords(maxAge) + "."};
    std::optional<long long> observed;
    if (spec.contains("observedAt") && spec["observedAt"].is_string()) {
      observed = parseTime(spec["observedAt"].get<std::string>());
    }
    if (!observed) {
      c.status = "False";
      c.reason = "NoHeartbeat";
      c.message = "The report does not say when the agent measured the node (no spec.observedAt).";
      failures.push_back({c.reason, "the report has no observedAt"});
    } else if (now_ - *observed > maxAge) {
      c.status = "False";
      c.reason = "ReportStale";
      c.message = "The agent last reported at " + formatTime(*observed) + ", more than " + durationInWords(maxAge) +
                  " ago: it may have stopped (look at the podshaper-agent pod on this node), and what this "
                  "report says may no longer be true.";
      failures.push_back({c.reason, "the report is older than " + durationInWords(maxAge)});
    } else {
      staleAt = *observed + maxAge + 1;
    }
    return c;
  }

  // The node's multi-node NVLink domain, a condition only where its GPUs are in one or are
  // registering with a fabric: a fabric not completed, failed or unhealthy, or GPUs in
  // different domains, is not validated whatever the policies ask, as NCCL would not use it.
  std::optional<Condition> nvlinkDomain(const std::optional<NvlinkDomain>& d, std::vector<Failure>& failures) const {
    if (!d) {
      if (r_.requireNVLinkDomain) {
        failures.push_back({"NoNVLinkDomain", "its GPUs are in no multi-node NVLink domain (" + noDomainWhy() + ")"});
      }
      return std::nullopt;
    }
    using Problem = NvlinkDomain::Problem;
    Condition c{conditions::kNVLinkDomain, "True", "Completed", ""};
    if (d->problem == Problem::kNone) {
      c.message = d->sentence() + ". Pods placed on nodes labelled " + std::string(names::kNvlinkDomain) + "=" +
                  d->id + " reach each other's GPUs over NVLink.";
      return c;
    }
    c.status = "False";
    std::string advice;
    switch (d->problem) {
      case Problem::kMixed:
        c.reason = "FabricMixed";
        advice = "Pods placed by one domain label would not all reach each other over NVLink, so the node carries "
                 "no " + std::string(names::kNvlinkDomain) + " label until its GPUs are in one domain: look at the "
                 "rack's NVLink partitions";
        break;
      case Problem::kNotStarted:
      case Problem::kInProgress:
        c.reason = d->problem == Problem::kNotStarted ? "FabricNotStarted" : "FabricInProgress";
        advice = "The node is validated again once the fabric manager has registered every GPU";
        break;
      case Problem::kFailed:
        c.reason = "FabricFailed";
        advice = "nvidia-smi -q (its Fabric section) on the node and the fabric manager's log say more";
        break;
      default:
        c.reason = "FabricUnhealthy";
        advice = "NVML's fabric health mask names these faults; nvidia-smi -q (its Fabric section) on the node "
                 "says more";
        break;
    }
    c.message = d->sentence() + (d->problem == Problem::kMixed || d->problem == Problem::kUnhealthy
                                     ? std::string()
                                     : ": " + d->problemWords) +
                ". " + advice + ".";
    failures.push_back({c.reason, d->name() + ": " + d->problemWords});
    return c;
  }

  // Why a node has no NVLink domain, in words (a registration not completed gives a domain
  // without id: nvlinkDomainOf).
  std::string noDomainWhy() const {
    for (const GpuInfo& gpu : t_.gpus) {
      if (gpu.fabric) return "their fabric's cluster UUID is all zeros: NVLink within the node only";
    }
    return "they report no NVLink fabric";
  }

  void requirements(std::vector<Failure>& failures) const {
    const std::size_t found = t_.gpus.size();
    if (r_.minGPUs && static_cast<long long>(found) < *r_.minGPUs) {
      failures.push_back({"TooFewGPUs", "it has " + counted(found, "GPU") + ", fewer than the " +
                                            std::to_string(*r_.minGPUs) + " required"});
    }
    if (r_.minLink) {
      std::vector<const GpuPair*> slow;
      for (const auto& p : t_.pairs) {
        auto link = parseLinkClass(p.link);
        if (!link || *link > *r_.minLink) slow.push_back(&p);
      }
      if (!slow.empty()) {
        failures.push_back({"LinkTooSlow", counted(slow.size(), "GPU pair") + " (" + pairList(slow, 4) +
                                               ") are joined by links slower than " + toString(*r_.minLink) +
                                               " (" + slow.front()->link + ")"});
      }
    }
    if (r_.minBandwidthGBps) {
      std::vector<const GpuPair*> unmeasured, low;
      const GpuPair* worst = nullptr;
      for (const auto& p : t_.pairs) {
        if (!p.bandwidthGBps) {
          unmeasured.push_back(&p);
        } else if (*p.bandwidthGBps < *r_.minBandwidthGBps) {
          low.push_back(&p);
          if (!worst || *p.bandwidthGBps < *worst->bandwidthGBps) worst = &p;
        }
      }
      if (!low.empty()) {
        failures.push_back({"BandwidthTooLow", counted(low.size(), "GPU pair") + " copy slower than the " +
                                                   gbps(*r_.minBandwidthGBps) + " required (slowest: " +
                                                   pairName(*worst) + " at " + gbps(*worst->bandwidthGBps) + ")"});
      } else if (!unmeasured.empty()) {
        failures.push_back({"BandwidthNotMeasured", "at least " + gbps(*r_.minBandwidthGBps) +
                                                        " between GPUs is required but the agent did not measure "
                                                        "bandwidth (run it with --measure-bandwidth)"});
      }
    }
  }

 private:
  const Topology& t_;
  const Node* node_;
  const Requirements& r_;
  long long now_;
  const std::vector<MemlockHeld>& held_;
};

}  // namespace

const Condition* Verdict::condition(const std::string& type) const {
  for (const auto& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

Verdict judge(const json& spec, const Node* node, const std::vector<Policy>& policies, long long now,
              const std::vector<MemlockHeld>& held) {
  // Policies select by the Node's own labels, never by the ones this verdict
  // writes: a policy on podshaper.io/topology-validated would flip forever.
  std::map<std::string, std::string> selectable;
  if (node != nullptr) {
    for (const auto& [k, value] : node->labels) {
      if (!k->starts_with(names::kKeyPrefix)) selectable.emplace(*k, *value);
    }
  }
  const EffectiveRequirements eff = effectiveRequirements(policies, selectable);
  Verdict v;
  v.policies = eff.policies;

  auto topology = topologyFromJson(spec);
  if (!topology) {
    v.interconnect = "none";
    v.p2p = "unknown";
    v.memlock = "unknown";
    const std::string why = "The report cannot be read (" + topology.error().message + "); is the agent on this "
                            "node the same version as the operator?";
    v.conditions = {{conditions::kValidated, "False", "ReportUnreadable", why},
                    {conditions::kP2PComplete, "Unknown", "ReportUnreadable", why},
                    {conditions::kMemlockUnlimited, "Unknown", "ReportUnreadable", why},
                    {conditions::kGPUCountMatchesNode, "Unknown", "ReportUnreadable", why},
                    {conditions::kFresh, "Unknown", "ReportUnreadable", why}};
    v.taintEffect = eff.requirements.taintEffect;
    return v;
  }

  Judge j(*topology, node, eff, now, held);
  j.summarize(v);
  std::vector<Failure> failures;
  if (eff.policies.empty()) {
    failures.push_back({"NoPolicy", "no TopologyPolicy selects this node (the install ships one named default)"});
  }
  Condition p2p = j.p2p(failures);
  Condition memlock = j.memlock(failures);
  Condition count = j.gpuCount(failures);
  Condition fresh = j.fresh(spec, failures, v.staleAt);
  const std::optional<NvlinkDomain> domain = nvlinkDomainOf(*topology);
  std::optional<Condition> nvlink = j.nvlinkDomain(domain, failures);
  if (domain && !domain->id.empty() && domain->problem != NvlinkDomain::Problem::kMixed) v.nvlinkDomain = domain->id;
  j.requirements(failures);

  Condition validated{conditions::kValidated, "True", "RequirementsMet", ""};
  if (failures.empty()) {
    validated.message = "The node meets " + policyNames(eff.policies) + ": training pods may be placed here.";
    v.validated = true;
  } else {
    validated.status = "False";
    validated.reason = failures.front().reason;
    std::string what = eff.policies.empty() ? "The node is not validated: " : "The node does not meet " +
                                                                                  policyNames(eff.policies) + ": ";
    for (std::size_t i = 0; i < failures.size(); ++i) what += (i ? "; " : "") + failures[i].words;
    validated.message = what + ". Node-exclusive training pods are not placed here until this is fixed.";
    v.taintEffect = eff.requirements.taintEffect;
    // A node that stopped applying the memlock: what runs there got it, and what would not
    // is held back; evicting the running pods (NoExecute) would only flap the node (the held
    // pod evicted, nothing held, validated again). Keep new pods off, no more.
    const bool onlyNotApplied = std::all_of(failures.begin(), failures.end(),
                                            [](const Failure& f) { return f.reason == "MemlockNotApplied"; });
    if (onlyNotApplied && v.taintEffect == "NoExecute") v.taintEffect = "NoSchedule";
  }
  v.conditions = {validated, p2p, memlock, count, fresh};
  if (nvlink) v.conditions.push_back(std::move(*nvlink));
  return v;
}

std::map<std::string, std::string> nodeLabels(const Verdict& v) {
  std::map<std::string, std::string> labels = {{std::string(names::kTopologyValidated), v.validated ? "true" : "false"},
                                               {std::string(names::kGpuCount), std::to_string(v.gpus)},
                                               {std::string(names::kInterconnect), v.interconnect},
                                               {std::string(names::kP2P), v.p2p},
                                               {std::string(names::kMemlock), v.memlock}};
  if (v.nvlinkDomain) labels.emplace(names::kNvlinkDomain, *v.nvlinkDomain);
  return labels;
}

}  // namespace podshaper
