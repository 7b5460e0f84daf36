#include "judging/pending.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "api/names.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"
#include "base/timefmt.h"

namespace podshaper {

const char* toString(PendingCause cause) {
  switch (cause) {
    case PendingCause::kGpuCount: return "gpu-count";
    case PendingCause::kValidated: return "validated";
    case PendingCause::kMemlock: return "memlock";
    case PendingCause::kP2P: return "p2p";
    case PendingCause::kSelector: return "selector";
    case PendingCause::kCordoned: return "cordoned";
    case PendingCause::kTaint: return "taint";
    case PendingCause::kNodeExclusive: return "node-exclusive";
    case PendingCause::kNvlinkDomain: return "nvlink-domain";
    case PendingCause::kScheduler: return "scheduler";
  }
  return "scheduler";
}

namespace {

using json = nlohmann::json;

std::optional<std::string> labelOf(const NodeFacts& n, const std::string& k) {
  const std::string* value = n.node.labels.find(k);
  if (value == nullptr) return std::nullopt;
  return *value;
}

// The node's GPUs as podshaper counts them: its gpu-count label, else what it allocates
// (a node podshaper has not judged yet).
std::optional<std::string> gpusOf(const NodeFacts& n) {
  if (auto v = labelOf(n, std::string(names::kGpuCount))) return v;
  if (n.node.gpus() > 0) return std::to_string(n.node.gpus());
  return std::nullopt;
}

// The pod's node requirements (api/node_requirement.h), matched as the scheduler matches
// them, except that a node podshaper has not judged is held to its allocatable GPUs: a
// node of the size asked that is not judged yet fails for that, not for its size.
bool matches(const NodeRequirement& r, const NodeFacts& n) {
  if (r.field) return r.matches(&n.node.name);
  if (r.key != names::kGpuCount) return r.matches(n.node.labels.find(r.key));
  const std::optional<std::string> gpus = gpusOf(n);
  return r.matches(gpus ? &*gpus : nullptr);
}

// What a pod asks of a node, one "slot" per kind of requirement, in the order a user
// reads them: podshaper's labels (GPU count, validated, memlock, P2P), then the pod's own
// selectors, then what no selector says (cordons, taints, the node-exclusive rule, the
// job's NVLink domain). A slot's kind is the cause it names when nodes fail it (never
// kScheduler): the causes are declared in reading order.
struct Slot {
  PendingCause kind;
  std::string key;                   // the label, for selector slots; the job's group, for kNvlinkDomain
  std::vector<NodeRequirement> variants;  // the slot's requirements across nodeSelectorTerms
  // kNvlinkDomain: the domains where the job's pods run (a node must be in one); none bound
  // yet: any domain will do, only a node in none fails.
  std::vector<std::string> domains;
};

// The pod's job and where its pods run, for a pod whose required podAffinity keeps its job
// in one NVLink domain (api/node_labels.h nvlinkGroupTerm).
struct NvlinkAsk {
  std::string group;                 // its podshaper.io/nvlink-group
  std::string boundAs;               // "namespace/group", as NodeFacts::nvlinkGroups has it
  std::vector<std::string> domains;  // sorted
};

std::optional<NvlinkAsk> nvlinkAskOf(const json& pod, const std::vector<NodeFacts>& nodes) {
  auto group = requiredNvlinkGroup(member(pod, "spec"));
  if (!group) return std::nullopt;
  NvlinkAsk ask{*group, stringMember(member(pod, "metadata"), "namespace") + "/" + *group, {}};
  std::set<std::string> domains;
  for (const NodeFacts& n : nodes) {
    // As the scheduler counts them: the group's pods on nodes that have a domain.
    const std::string* domain = n.node.label(names::kNvlinkDomain);
    if (domain != nullptr && std::binary_search(n.nvlinkGroups.begin(), n.nvlinkGroups.end(), ask.boundAs)) {
      domains.insert(*domain);
    }
  }
  ask.domains.assign(domains.begin(), domains.end());
  return ask;
}

// "NVLink domain a", "NVLink domains a, b".
std::string domainsWords(const std::vector<std::string>& domains) {
  return (domains.size() == 1 ? "NVLink domain " : "NVLink domains ") + someOf(domains);
}

// The cause a requirement on `key` names when nodes fail it.
PendingCause kindOf(const std::string& key) {
  switch (nodeLabelKind(key)) {
    case NodeLabelKind::kGpuCount: return PendingCause::kGpuCount;
    case NodeLabelKind::kValidated: return PendingCause::kValidated;
    case NodeLabelKind::kMemlock: return PendingCause::kMemlock;
    case NodeLabelKind::kP2P: return PendingCause::kP2P;
    case NodeLabelKind::kOther: return PendingCause::kSelector;
  }
  return PendingCause::kSelector;
}

// A GPU count as a label or a node selector writes it, with its noun: "1 GPU", "8 GPUs".
std::string gpusText(const std::string& count) { return count + (count == "1" ? " GPU" : " GPUs"); }

// What a node must be, as the rest of "a node that …".
std::string needWords(const Slot& s) {
  switch (s.kind) {
    case PendingCause::kGpuCount:
      return "has " +
             gpusText(s.variants.front().values.empty() ? std::string("?") : s.variants.front().values.front()) + " (" +
             s.variants.front().words() + ")";
    case PendingCause::kValidated:
      return "is validated by podshaper (" + s.variants.front().words() + ")";
    case PendingCause::kMemlock:
      return "grants memlock " + memlockAskedWords(s.variants) + " (" + std::string(names::kMemlock) + ")";
    case PendingCause::kP2P:
      return "has P2P between all its GPUs (" + s.variants.front().words() + ")";
    case PendingCause::kSelector: return "matches " + s.variants.front().words();
    case PendingCause::kCordoned: return "is not cordoned";
    case PendingCause::kTaint: return "carries no taint the pod does not tolerate";
    case PendingCause::kNodeExclusive: return "runs no other node-exclusive pod";
    case PendingCause::kNvlinkDomain:
      return "is in " + domainsWords(s.domains) + " with its job's other pods (" + std::string(names::kNvlinkGroupLabel) +
             "=" + s.key + ")";
    case PendingCause::kScheduler: break;  // not a slot
  }
  return {};
}

// How nodes fail a slot, singular and plural.
std::pair<std::string, std::string> failWords(const Slot& s) {
  switch (s.kind) {
    case PendingCause::kGpuCount: {
      std::string n = s.variants.front().values.empty() ? "?" : s.variants.front().values.front();
      return {"does not have " + gpusText(n), "do not have " + gpusText(n)};
    }
    case PendingCause::kValidated: return {"is not validated", "are not validated"};
    case PendingCause::kMemlock: return {"does not grant that memlock", "do not grant that memlock"};
    case PendingCause::kP2P: return {"lacks P2P between some of its GPUs", "lack P2P between some of their GPUs"};
    case PendingCause::kSelector: {
      std::string w = s.variants.front().words();
      return {"does not match " + w, "do not match " + w};
    }
    case PendingCause::kCordoned: return {"is cordoned", "are cordoned"};
    case PendingCause::kTaint: return {"carries a taint the pod does not tolerate", "carry a taint the pod does not tolerate"};
    case PendingCause::kNodeExclusive: return {"already runs a node-exclusive pod", "already run a node-exclusive pod"};
    case PendingCause::kNvlinkDomain: {
      if (s.domains.empty()) {
        const std::string why = " in no NVLink domain, which the pod's podAffinity needs";
        return {"is" + why, "are" + why};
      }
      const std::string where = s.domains.size() == 1 ? " in the job's NVLink domain" : " in the job's NVLink domains";
      return {"is not" + where, "are not" + where};
    }
    case PendingCause::kScheduler: break;  // not a slot
  }
  return {};
}

bool tolerates(const json& tolerations, const Taint& t) {
  if (!tolerations.is_array()) return false;
  for (const json& tol : tolerations) {
    const std::string effect = stringMember(tol, "effect");
    if (!effect.empty() && effect != t.effect) continue;
    const std::string k = stringMember(tol, "key");
    const std::string op = stringMember(tol, "operator");
    if (k.empty() && op == "Exists") return true;
    if (k != t.key) continue;
    if (op == "Exists" || stringMember(tol, "value") == t.value) return true;
  }
  return false;
}

const Taint* untoleratedTaint(const NodeFacts& n, const json& tolerations) {
  for (const Taint& t : n.node.taints) {
    if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
    if (!tolerates(tolerations, t)) return &t;
  }
  return nullptr;
}

// A node's state as it fails a slot: what groups the examples.
std::string detailOf(const Slot& s, const NodeFacts& n, const json& tolerations) {
  switch (s.kind) {
    case PendingCause::kGpuCount: {
      if (auto v = labelOf(n, s.key)) return gpusText(*v);
      return n.node.gpus() > 0 ? counted(n.node.gpus(), "GPU") + ", " + std::string(kNotJudgedWords) : "no GPUs";
    }
    case PendingCause::kValidated:
      if (!n.notValidatedReason.empty()) return n.notValidatedReason;
      return labelOf(n, s.key) ? "not validated" : std::string(kNotJudgedWords);
    case PendingCause::kMemlock:
      if (auto v = labelOf(n, s.key)) {
        auto bytes = parseCount(*v);
        return "memlock " + (bytes && *bytes <= INT64_MAX ? formatBytes(static_cast<int64_t>(*bytes)) : *v);
      }
      return std::string(kNotJudgedWords);
    case PendingCause::kP2P:
      if (auto v = labelOf(n, s.key)) return "p2p " + *v;
      return std::string(kNotJudgedWords);
    case PendingCause::kSelector:
      if (s.variants.front().field) return "name " + n.node.name;
      if (auto v = labelOf(n, s.key)) return s.key + "=" + *v;
      return "no " + s.key;
    case PendingCause::kCordoned: return "cordoned";
    case PendingCause::kTaint: {
      const Taint* t = untoleratedTaint(n, tolerations);
      if (t == nullptr) return {};
      return t->key + (t->value.empty() ? "" : "=" + t->value) + ":" + t->effect;
    }
    case PendingCause::kNodeExclusive: return joined(n.exclusivePods);
    case PendingCause::kNvlinkDomain:
      if (auto d = labelOf(n, std::string(names::kNvlinkDomain))) return "NVLink domain " + *d;
      return "no " + std::string(names::kNvlinkDomain);
    case PendingCause::kScheduler: break;  // not a slot
  }
  return {};
}

// The slots in reading order, and each requirement's slot.
struct Slots {
  std::vector<Slot> slots;
  std::vector<std::vector<std::size_t>> slotOf;  // per term, per requirement
};

// Requirements on one of podshaper's labels share a slot whatever their operator (the
// memlock's In and Gt alternatives); the pod's own, one per key and operator.
std::string slotKey(const NodeRequirement& r) {
  return (r.field ? "field:" : "") + r.key + (kindOf(r.key) == PendingCause::kSelector ? "|" + std::string(toString(r.op)) : "");
}

Slots slotsOf(const std::vector<std::vector<NodeRequirement>>& terms, bool nodeExclusive,
              const std::optional<NvlinkAsk>& nvlink) {
  Slots out;
  std::map<std::string, std::size_t> byKey;
  for (const auto& term : terms) {
    for (const auto& r : term) {
      auto [it, added] = byKey.emplace(slotKey(r), out.slots.size());
      if (added) out.slots.push_back({r.field ? PendingCause::kSelector : kindOf(r.key), r.key, {}, {}});
      out.slots[it->second].variants.push_back(r);
    }
  }
  out.slots.push_back({PendingCause::kCordoned, {}, {}, {}});
  out.slots.push_back({PendingCause::kTaint, {}, {}, {}});
  if (nodeExclusive) out.slots.push_back({PendingCause::kNodeExclusive, {}, {}, {}});
  if (nvlink) out.slots.push_back({PendingCause::kNvlinkDomain, nvlink->group, {}, nvlink->domains});
  std::vector<std::size_t> order(out.slots.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return out.slots[a].kind < out.slots[b].kind;
  });
  std::vector<std::size_t> rank(order.size());
  std::vector<Slot> sorted;
  for (std::size_t i = 0; i < order.size(); ++i) {
    rank[order[i]] = i;
    sorted.push_back(std::move(out.slots[order[i]]));
  }
  out.slots = std::move(sorted);
  for (const auto& term : terms) {
    std::vector<std::size_t> of;
    for (const auto& r : term) of.push_back(rank[byKey.at(slotKey(r))]);
    out.slotOf.push_back(std::move(of));
  }
  return out;
}

constexpr std::size_t kPass = static_cast<std::size_t>(-1);

// The first slot a node fails, in reading order (kPass: none). A node matches the
// affinity when any term matches; among failing terms, the one it comes closest to names
// the slot (the memlock alternatives are one term each).
std::size_t firstFailure(const Slots& s, const std::vector<std::vector<NodeRequirement>>& terms, const NodeFacts& n,
                         const json& tolerations) {
  std::size_t affinity = kPass;
  bool anyTerm = false;
  for (std::size_t t = 0; t < terms.size(); ++t) {
    std::size_t failed = kPass;
    for (std::size_t i = 0; i < terms[t].size(); ++i) {
      if (!matches(terms[t][i], n)) failed = std::min(failed, s.slotOf[t][i]);
    }
    if (failed == kPass) {
      anyTerm = true;
      break;
    }
    affinity = affinity == kPass ? failed : std::max(affinity, failed);
  }
  if (!anyTerm) return affinity;
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    switch (s.slots[i].kind) {
      case PendingCause::kCordoned:
        if (n.node.unschedulable) return i;
        break;
      case PendingCause::kTaint:
        if (untoleratedTaint(n, tolerations) != nullptr) return i;
        break;
      case PendingCause::kNodeExclusive:
        if (!n.exclusivePods.empty()) return i;
        break;
      case PendingCause::kNvlinkDomain: {
        // The scheduler's inter-pod affinity: the node must have the topology label, and where
        // the group has pods, the value of one of theirs.
        const std::string* domain = n.node.label(names::kNvlinkDomain);
        const auto& in = s.slots[i].domains;
        if (domain == nullptr || (!in.empty() && !std::binary_search(in.begin(), in.end(), *domain))) return i;
        break;
      }
      default:
        break;
    }
  }
  return kPass;
}

std::string ageWords(long long seconds) {
  if (seconds < 120) return std::to_string(seconds) + "s";
  if (seconds < 7200) return std::to_string(seconds / 60) + "m";
  return std::to_string(seconds / 3600) + "h";
}

// The pod's PodScheduled condition's message, if the scheduler wrote one.
std::string schedulerSays(const json& pod) {
  for (const json& c : member(member(pod, "status"), "conditions")) {
    if (stringMember(c, "type") == "PodScheduled" && stringMember(c, "status") == "False") {
      return stringMember(c, "message");
    }
  }
  return {};
}

struct Wait {
  bool pending = false;  // unscheduled, and not going away
  long long age = 0;     // seconds since it began to wait
  bool gated = false;    // held by scheduling gates
};

Wait waitOf(const json& pod, long long now) {
  Wait w;
  const json& meta = member(pod, "metadata");
  const json& spec = member(pod, "spec");
  const std::string phase = stringMember(member(pod, "status"), "phase");
  if (!stringMember(spec, "nodeName").empty() || !member(meta, "deletionTimestamp").is_null() ||
      (!phase.empty() && phase != "Pending")) {
    return w;
  }
  w.pending = true;
  // Waiting since it was created, or since the scheduler last changed its mind (a pod
  // released from its scheduling gates waits from then).
  long long since = parseTime(stringMember(meta, "creationTimestamp")).value_or(now);
  for (const json& c : member(member(pod, "status"), "conditions")) {
    if (stringMember(c, "type") != "PodScheduled") continue;
    if (auto t = parseTime(stringMember(c, "lastTransitionTime"))) since = std::max(since, *t);
  }
  w.age = std::max(0LL, now - since);
  // Held back on purpose (Kueue and other admission controllers gate pods until their
  // quota admits them): not the scheduler's to place yet, nothing to explain.
  const json& gates = member(spec, "schedulingGates");
  w.gated = gates.is_array() && !gates.empty();
  return w;
}

// Every node sorted against the pod's requirements: the ones that meet all of them, and per
// requirement (slot) the nodes that fail it first, grouped by what they are instead.
struct NodeTally {
  std::vector<std::string> fit;
  std::vector<std::map<std::string, std::vector<std::string>>> failing;
  std::vector<std::size_t> failCount;
  std::vector<std::size_t> firstFailed;  // per node, in the nodes' order (kPass: none)
};

NodeTally tallyNodes(const Slots& s, const std::vector<std::vector<NodeRequirement>>& terms,
                     const std::vector<NodeFacts>& nodes, const json& tolerations) {
  NodeTally t{{}, std::vector<std::map<std::string, std::vector<std::string>>>(s.slots.size()),
              std::vector<std::size_t>(s.slots.size(), 0), {}};
  for (const NodeFacts& n : nodes) {
    const std::size_t i = firstFailure(s, terms, n, tolerations);
    t.firstFailed.push_back(i);
    if (i == kPass) {
      t.fit.push_back(n.node.name);
      continue;
    }
    ++t.failCount[i];
    const std::string detail = detailOf(s.slots[i], n, tolerations);
    t.failing[i][s.slots[i].kind == PendingCause::kNodeExclusive ? n.node.name + " runs " + detail : detail].push_back(n.node.name);
  }
  return t;
}

// "It needs a node that …": the requirements a user can read as asked of the pod.
std::string needsSentence(const Slots& s) {
  std::vector<std::string> needs;
  for (const Slot& slot : s.slots) {
    if (slot.kind == PendingCause::kCordoned || slot.kind == PendingCause::kTaint) continue;
    if (slot.kind == PendingCause::kNvlinkDomain && slot.domains.empty()) continue;  // any domain will do
    needs.push_back(needWords(slot));
  }
  if (needs.empty()) return "";
  std::string list;
  for (std::size_t i = 0; i < needs.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == needs.size() ? " and " : ", ") + needs[i];
  }
  return " It needs a node that " + list + ".";
}

// A group of nodes that carry the same untolerated taint (`taint` as detailOf writes it:
// "key=value:effect"): the taints the node controller puts on a node whose kubelet stopped
// reporting, or says it is not ready, in words; any other taint, as written.
std::string taintExample(const std::string& taint, const std::vector<std::string>& nodes) {
  const std::string key = taint.substr(0, taint.find_first_of("=:"));
  const bool one = nodes.size() == 1;
  std::string why;
  if (key == "node.kubernetes.io/unreachable") {
    why = one ? "its kubelet stopped reporting" : "their kubelets stopped reporting";
  } else if (key == "node.kubernetes.io/not-ready") {
    why = one ? "its kubelet reports it not ready" : "their kubelets report them not ready";
  } else {
    return taint + ": " + someOf(nodes);
  }
  return someOf(nodes) + (one ? " is" : " are") + " NotReady: " + why + " (taint " + taint + ")";
}

// Per failed requirement: "12 do not have 8 GPUs (4 GPUs: n10, n11, n12 and 9 more)".
std::vector<std::string> failureGroups(const Slots& s, const NodeTally& t) {
  std::vector<std::string> groups;
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    if (t.failCount[i] == 0) continue;
    const auto [one, many] = failWords(s.slots[i]);
    std::vector<std::pair<std::string, std::vector<std::string>>> byDetail(t.failing[i].begin(), t.failing[i].end());
    std::stable_sort(byDetail.begin(), byDetail.end(),
                     [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
    std::vector<std::string> examples;
    for (std::size_t g = 0; g < byDetail.size() && g < 3; ++g) {
      if (s.slots[i].kind == PendingCause::kNodeExclusive || s.slots[i].kind == PendingCause::kCordoned) {
        examples.push_back(s.slots[i].kind == PendingCause::kCordoned ? someOf(byDetail[g].second) : byDetail[g].first);
      } else if (s.slots[i].kind == PendingCause::kTaint) {
        examples.push_back(taintExample(byDetail[g].first, byDetail[g].second));
      } else {
        examples.push_back(byDetail[g].first + ": " + someOf(byDetail[g].second));
      }
    }
    if (byDetail.size() > 3) examples.push_back("…");
    groups.push_back(std::to_string(t.failCount[i]) + " " + (t.failCount[i] == 1 ? one : many) + " (" +
                     joined(examples, "; ") + ")");
  }
  return groups;
}

// Where the job's pods run and where they could, for a pod that must join them: "The job's
// pods (podshaper.io/nvlink-group=job.llama) run in NVLink domain a, whose 9 nodes are all
// taken (8 by this job, 1 by train/other-0); NVLink domain b has 9 free nodes: …". Free: a
// node that fails nothing else (no node of the job's domains is, where this is said).
std::string nvlinkAdvice(const Slots& s, std::size_t slot, const NodeTally& t, const std::vector<NodeFacts>& nodes,
                         const std::string& boundAs) {
  const std::vector<std::string>& ours = s.slots[slot].domains;
  std::size_t inOurs = 0, byJob = 0, byOthers = 0;
  std::vector<std::string> otherPods;
  std::map<std::string, std::size_t> freeElsewhere;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeFacts& n = nodes[i];
    const std::string* domain = n.node.label(names::kNvlinkDomain);
    if (domain == nullptr) continue;
    if (!std::binary_search(ours.begin(), ours.end(), *domain)) {
      if (t.firstFailed[i] == slot) ++freeElsewhere[*domain];
      continue;
    }
    ++inOurs;
    if (t.firstFailed[i] == kPass || s.slots[t.firstFailed[i]].kind != PendingCause::kNodeExclusive) continue;
    if (std::binary_search(n.nvlinkGroups.begin(), n.nvlinkGroups.end(), boundAs)) {
      ++byJob;
    } else {
      ++byOthers;
      otherPods.insert(otherPods.end(), n.exclusivePods.begin(), n.exclusivePods.end());
    }
  }
  std::vector<std::string> by;
  if (byJob > 0) by.push_back(std::to_string(byJob) + " by this job");
  if (byOthers > 0) by.push_back(std::to_string(byOthers) + " by " + someOf(otherPods, 1));  // named above too
  const std::string takenBy = " (" + joined(by) + ")";
  const std::size_t taken = byJob + byOthers;
  // The domain was named in what the pod needs: here it is "the job's domain", so that the
  // advice fits the Event's 1024 bytes after the requirements (a domain's name is 38 bytes).
  const std::string where = ours.size() == 1 ? "the job's NVLink domain" : "the job's NVLink domains";
  std::string out = " In " + where + ", ";
  if (inOurs == 1) {
    out += taken == 1 ? "its 1 node is taken" + takenBy : "its 1 node fails a requirement above";
  } else if (taken == inOurs) {
    out += "all " + counted(inOurs, "node") + " are taken" + takenBy;
  } else if (taken == 0) {
    out += "all " + counted(inOurs, "node") + " fail a requirement above";
  } else {
    out += std::to_string(taken) + " of " + counted(inOurs, "node") + (taken == 1 ? " is" : " are") + " taken" + takenBy +
           " and " + std::to_string(inOurs - taken) + (inOurs - taken == 1 ? " fails" : " fail") + " a requirement above";
  }
  if (freeElsewhere.empty()) return out + "; no other NVLink domain has a free node. It starts when a node in " + where + " frees.";
  std::vector<std::pair<std::string, std::size_t>> others(freeElsewhere.begin(), freeElsewhere.end());
  std::stable_sort(others.begin(), others.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  out += "; ";
  if (others.size() == 1) {
    out += "NVLink domain " + others.front().first + " has " + counted(others.front().second, "free node");
  } else {
    out += "NVLink domains " + someOf(others, 3, [](const auto& d) {
             return d.first + " (" + counted(d.second, "free node") + ")";
           }) + " have room";
  }
  return out + ": gang scheduling (Kueue's topology-aware scheduling, the Workload API) starts a job where all its "
               "pods fit; without it, this pod starts when a node in " + where + " frees, or create the job again "
               "for its first pod to pick a domain anew.";
}

// What the user can do, or what the scheduler says where podshaper's requirements are met.
std::string whatToDo(const json& pod, const Slots& s, const NodeTally& t, const std::vector<NodeFacts>& nodes,
                     const std::optional<NvlinkAsk>& nvlink) {
  if (!t.fit.empty()) {
    const std::string said = schedulerSays(pod);
    return " " + counted(t.fit.size(), "node") + " meet" + (t.fit.size() == 1 ? "s" : "") + " all of it (" +
           someOf(t.fit) + ")" +
           (said.empty() ? ": the scheduler has not said why it waits." : "; the scheduler says: " + said);
  }
  std::size_t gpuCountFailures = 0;
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    if (s.slots[i].kind == PendingCause::kGpuCount && t.failCount[i] > 0) gpuCountFailures = t.failCount[i];
  }
  if (gpuCountFailures == nodes.size() && !nodes.empty()) {
    std::map<uint64_t, std::size_t> sizes;
    for (const NodeFacts& n : nodes) {
      auto g = parseCount(gpusOf(n).value_or("0"));
      if (g && *g > 0) ++sizes[*g];
    }
    std::vector<std::string> have;
    for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) have.push_back(std::to_string(it->first));
    return " No node has that many GPUs: ask for a count the nodes have" +
           (have.empty() ? std::string() : " (" + joined(have) + ")") +
           " in each pod's nvidia.com/gpu, splitting the job into more pods, or add such nodes.";
  }
  // For each kind of failure that has an answer (most need an admin).
  std::string out;
  // Nodes outside the job's NVLink domain: where the job runs says more than the pods named.
  bool outsideDomain = false;
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    outsideDomain |= s.slots[i].kind == PendingCause::kNvlinkDomain && !s.slots[i].domains.empty() && t.failCount[i] > 0;
  }
  // The job's domain first: with a long list of needs above it, what comes last may be cut.
  std::string domainAdvice;
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    if (t.failCount[i] == 0) continue;
    if (s.slots[i].kind == PendingCause::kNvlinkDomain && outsideDomain) {
      domainAdvice = nvlinkAdvice(s, i, t, nodes, nvlink->boundAs);
    } else if (s.slots[i].kind == PendingCause::kNodeExclusive && !outsideDomain) {
      out += " It starts when a node-exclusive pod named here ends.";
    } else if (s.slots[i].kind == PendingCause::kValidated) {
      // The largest group's first node: judged and failing, or never reported.
      const auto& [detail, names] = *std::max_element(
          t.failing[i].begin(), t.failing[i].end(),
          [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
      out += detail == std::string(kNotJudgedWords)
                 ? " podshaper-agent has not reported " + names.front() + " (is it running there?)."
                 : " kubectl describe gtr " + names.front() +
                       " (podshaper's report of that node's GPUs) says why it is not validated.";
    }
  }
  return domainAdvice + out;
}

}  // namespace

bool waitsToBeExplained(const json& pod, long long now, long long graceSeconds) {
  const Wait w = waitOf(pod, now);
  return w.pending && w.age >= graceSeconds && !w.gated;
}

PendingJudgement judgePending(const json& pod, const std::vector<NodeFacts>& nodes, long long now,
                              long long graceSeconds) {
  PendingJudgement out;
  const Wait w = waitOf(pod, now);
  if (!w.pending) return out;
  out.pending = true;
  if (w.age < graceSeconds) {
    out.lookAgainAfter = std::max(1LL, graceSeconds - w.age);
    return out;
  }
  out.lookAgainAfter = 30;
  if (w.gated) return out;
  const json& spec = member(pod, "spec");
  const bool nodeExclusive =
      stringMember(member(member(pod, "metadata"), "labels"), names::kPlacementLabel) == names::kNodeExclusive;
  const auto terms = podNodeTerms(spec);
  const auto nvlink = nvlinkAskOf(pod, nodes);
  const Slots s = slotsOf(terms, nodeExclusive, nvlink);
  const NodeTally t = tallyNodes(s, terms, nodes, member(spec, "tolerations"));

  out.answer =
      t.fit.empty() ? "no node can take this pod now." : "podshaper's requirements are met, yet no node took it.";
  out.answer += needsSentence(s);
  if (nodes.empty()) {
    out.answer += " The cluster has no node.";
  } else if (auto groups = failureGroups(s, t); !groups.empty()) {
    out.answer += " Of " + counted(nodes.size(), "node") + ", " + joined(groups, "; ") + ".";
  }
  out.answer += whatToDo(pod, s, t, nodes, nvlink);
  // What stops the nodes that come closest: the last requirement any node fails.
  std::size_t closest = kPass;
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    if (t.failCount[i] > 0) closest = i;
  }
  out.cause = !t.fit.empty() || closest == kPass ? PendingCause::kScheduler : s.slots[closest].kind;
  out.event = EventSpec{"Warning", reasons::kNotPlaceable, "Pending for " + ageWords(w.age) + ": " + out.answer};
  return out;
}

}  // namespace podshaper
