#include "judging/pod_explain.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "api/names.h"
#include "api/shm_volume.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"
#include "base/timefmt.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

std::optional<std::string> labelOf(const NodeFacts& n, const std::string& k) {
  const std::string* value = n.labels.find(k);
  if (value == nullptr) return std::nullopt;
  return *value;
}

// One node-selector requirement (nodeSelector, matchExpressions, matchFields).
struct Requirement {
  std::string key, op;
  std::vector<std::string> values;
  bool field = false;  // matchFields: metadata.name
};

// The node's GPUs as podshaper counts them: its gpu-count label, else what it allocates
// (a node podshaper has not judged yet).
std::optional<std::string> gpusOf(const NodeFacts& n) {
  if (auto v = labelOf(n, std::string(names::kGpuCount))) return v;
  if (n.gpus() > 0) return std::to_string(n.gpus());
  return std::nullopt;
}

// As the scheduler matches, except that a node podshaper has not judged is held to its
// allocatable GPUs: a node of the size asked that is not judged yet fails for that, not
// for its size.
bool matches(const Requirement& r, const NodeFacts& n) {
  std::optional<std::string> value;
  if (r.field) {
    value = n.name;
  } else {
    value = r.key == names::kGpuCount ? gpusOf(n) : labelOf(n, r.key);
  }
  const bool in = value && std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
  if (r.op == "In") return in;
  if (r.op == "NotIn") return !in;
  if (r.op == "Exists") return value.has_value();
  if (r.op == "DoesNotExist") return !value;
  if (r.op == "Gt" || r.op == "Lt") {
    if (!value || r.values.size() != 1) return false;
    auto have = parseCount(*value);
    auto bound = parseCount(r.values[0]);
    if (!have || !bound) return false;
    return r.op == "Gt" ? *have > *bound : *have < *bound;
  }
  return false;
}

std::string joined(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

// What a pod asks of a node, one "slot" per kind of requirement, in the order a user
// reads them: podshaper's labels (GPU count, validated, memlock, P2P), then the pod's own
// selectors, then what no selector says (cordons, taints, the node-exclusive rule).
enum class SlotKind { kGpuCount, kValidated, kMemlock, kP2P, kOther, kCordoned, kTaint, kExclusive };

struct Slot {
  SlotKind kind;
  std::string key;                   // the label, for selector slots
  std::vector<Requirement> variants;  // the slot's requirements across nodeSelectorTerms
};

SlotKind kindOf(const std::string& k) {
  if (k == names::kGpuCount) return SlotKind::kGpuCount;
  if (k == names::kTopologyValidated) return SlotKind::kValidated;
  if (k == names::kMemlock) return SlotKind::kMemlock;
  if (k == names::kP2P) return SlotKind::kP2P;
  return SlotKind::kOther;
}

std::string requirementWords(const Requirement& r) {
  if (r.op == "In" && r.values.size() == 1) return r.key + "=" + r.values[0];
  if (r.op == "Exists" || r.op == "DoesNotExist") return r.key + " " + r.op;
  return r.key + " " + r.op + " [" + joined(r.values) + "]";
}

// "grants memlock unlimited or at least 4194304"
std::string memlockWords(const Slot& s) {
  std::vector<std::string> options;
  for (const auto& r : s.variants) {
    if (r.op == "In") {
      for (const auto& v : r.values) options.push_back(v);
    } else if (r.op == "Gt" && r.values.size() == 1) {
      auto bound = parseCount(r.values[0]);
      options.push_back("at least " + (bound ? formatBytes(static_cast<int64_t>(*bound + 1)) : r.values[0]));
    }
  }
  std::sort(options.begin(), options.end());
  options.erase(std::unique(options.begin(), options.end()), options.end());
  return joined(options, " or ");
}

// A GPU count as a label or a node selector writes it, with its noun: "1 GPU", "8 GPUs".
std::string gpusText(const std::string& count) { return count + (count == "1" ? " GPU" : " GPUs"); }

// What a node must be, as the rest of "a node that …".
std::string needWords(const Slot& s) {
  switch (s.kind) {
    case SlotKind::kGpuCount:
      return "has " +
             gpusText(s.variants.front().values.empty() ? std::string("?") : s.variants.front().values.front()) + " (" +
             requirementWords(s.variants.front()) + ")";
    case SlotKind::kValidated:
      return "is validated by podshaper (" + requirementWords(s.variants.front()) + ")";
    case SlotKind::kMemlock:
      return "grants memlock " + memlockWords(s) + " (" + std::string(names::kMemlock) + ")";
    case SlotKind::kP2P:
      return "has P2P between all its GPUs (" + requirementWords(s.variants.front()) + ")";
    case SlotKind::kOther:
      return "matches " + requirementWords(s.variants.front());
    case SlotKind::kCordoned:
      return "is not cordoned";
    case SlotKind::kTaint:
      return "carries no taint the pod does not tolerate";
    case SlotKind::kExclusive:
      return "runs no other node-exclusive pod";
  }
  return {};
}

// How nodes fail a slot, singular and plural.
std::pair<std::string, std::string> failWords(const Slot& s) {
  switch (s.kind) {
    case SlotKind::kGpuCount: {
      std::string n = s.variants.front().values.empty() ? "?" : s.variants.front().values.front();
      return {"does not have " + gpusText(n), "do not have " + gpusText(n)};
    }
    case SlotKind::kValidated: return {"is not validated", "are not validated"};
    case SlotKind::kMemlock: return {"does not grant that memlock", "do not grant that memlock"};
    case SlotKind::kP2P: return {"lacks P2P between some of its GPUs", "lack P2P between some of their GPUs"};
    case SlotKind::kOther: {
      std::string w = requirementWords(s.variants.front());
      return {"does not match " + w, "do not match " + w};
    }
    case SlotKind::kCordoned: return {"is cordoned", "are cordoned"};
    case SlotKind::kTaint: return {"carries a taint the pod does not tolerate", "carry a taint the pod does not tolerate"};
    case SlotKind::kExclusive: return {"already runs a node-exclusive pod", "already run a node-exclusive pod"};
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
  for (const Taint& t : n.taints) {
    if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
    if (!tolerates(tolerations, t)) return &t;
  }
  return nullptr;
}

// A node's state as it fails a slot: what groups the examples.
std::string detailOf(const Slot& s, const NodeFacts& n, const json& tolerations) {
  switch (s.kind) {
    case SlotKind::kGpuCount: {
      if (auto v = labelOf(n, s.key)) return gpusText(*v);
      return n.gpus() > 0 ? counted(n.gpus(), "GPU") + ", not judged by podshaper" : "no GPUs";
    }
    case SlotKind::kValidated:
      if (!n.notValidatedReason.empty()) return n.notValidatedReason;
      return labelOf(n, s.key) ? "not validated" : "not judged by podshaper";
    case SlotKind::kMemlock:
      if (auto v = labelOf(n, s.key)) {
        auto bytes = parseCount(*v);
        return "memlock " + (bytes && *bytes <= INT64_MAX ? formatBytes(static_cast<int64_t>(*bytes)) : *v);
      }
      return "not judged by podshaper";
    case SlotKind::kP2P:
      if (auto v = labelOf(n, s.key)) return "p2p " + *v;
      return "not judged by podshaper";
    case SlotKind::kOther:
      if (s.variants.front().field) return "name " + n.name;
      if (auto v = labelOf(n, s.key)) return s.key + "=" + *v;
      return "no " + s.key;
    case SlotKind::kCordoned: return "cordoned";
    case SlotKind::kTaint: {
      const Taint* t = untoleratedTaint(n, tolerations);
      if (t == nullptr) return {};
      return t->key + (t->value.empty() ? "" : "=" + t->value) + ":" + t->effect;
    }
    case SlotKind::kExclusive: return joined(n.exclusivePods);
  }
  return {};
}

std::vector<Requirement> requirementsOf(const json& expressions, bool field) {
  std::vector<Requirement> out;
  if (!expressions.is_array()) return out;
  for (const json& e : expressions) {
    Requirement r{stringMember(e, "key"), stringMember(e, "operator"), {}, field};
    for (const json& v : member(e, "values")) {
      if (v.is_string()) r.values.push_back(v.get<std::string>());
    }
    out.push_back(std::move(r));
  }
  return out;
}

// The pod's node requirements: its required node affinity's terms (ORed), each with the
// nodeSelector's pairs (ANDed); one empty term when it has none.
std::vector<std::vector<Requirement>> termsOf(const json& spec) {
  std::vector<Requirement> selector;
  const json& nodeSelector = member(spec, "nodeSelector");
  if (nodeSelector.is_object()) {
    for (const auto& [k, v] : nodeSelector.items()) {
      selector.push_back({k, "In", {v.is_string() ? v.get<std::string>() : v.dump()}, false});
    }
  }
  std::vector<std::vector<Requirement>> terms;
  const json& required = member(member(member(spec, "affinity"), "nodeAffinity"),
                                "requiredDuringSchedulingIgnoredDuringExecution");
  for (const json& term : member(required, "nodeSelectorTerms")) {
    auto reqs = requirementsOf(member(term, "matchExpressions"), false);
    auto fields = requirementsOf(member(term, "matchFields"), true);
    reqs.insert(reqs.end(), fields.begin(), fields.end());
    reqs.insert(reqs.end(), selector.begin(), selector.end());
    terms.push_back(std::move(reqs));
  }
  if (terms.empty()) terms.push_back(selector);
  return terms;
}

// The slots in reading order, and each requirement's slot.
struct Slots {
  std::vector<Slot> slots;
  std::vector<std::vector<std::size_t>> slotOf;  // per term, per requirement
};

Slots slotsOf(const std::vector<std::vector<Requirement>>& terms, bool nodeExclusive) {
  Slots out;
  std::map<std::string, std::size_t> byKey;
  for (const auto& term : terms) {
    for (const auto& r : term) {
      const std::string k = (r.field ? "field:" : "") + r.key + (kindOf(r.key) == SlotKind::kOther ? "|" + r.op : "");
      auto [it, added] = byKey.emplace(k, out.slots.size());
      if (added) out.slots.push_back({r.field ? SlotKind::kOther : kindOf(r.key), r.key, {}});
      out.slots[it->second].variants.push_back(r);
    }
  }
  out.slots.push_back({SlotKind::kCordoned, {}, {}});
  out.slots.push_back({SlotKind::kTaint, {}, {}});
  if (nodeExclusive) out.slots.push_back({SlotKind::kExclusive, {}, {}});
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
    for (const auto& r : term) {
      const std::string k = (r.field ? "field:" : "") + r.key + (kindOf(r.key) == SlotKind::kOther ? "|" + r.op : "");
      of.push_back(rank[byKey.at(k)]);
    }
    out.slotOf.push_back(std::move(of));
  }
  return out;
}

constexpr std::size_t kPass = static_cast<std::size_t>(-1);

// The first slot a node fails, in reading order (kPass: none). A node matches the
// affinity when any term matches; among failing terms, the one it comes closest to names
// the slot (the memlock alternatives are one term each).
std::size_t firstFailure(const Slots& s, const std::vector<std::vector<Requirement>>& terms, const NodeFacts& n,
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
      case SlotKind::kCordoned:
        if (n.unschedulable) return i;
        break;
      case SlotKind::kTaint:
        if (untoleratedTaint(n, tolerations) != nullptr) return i;
        break;
      case SlotKind::kExclusive:
        if (!n.exclusivePods.empty()) return i;
        break;
      default:
        break;
    }
  }
  return kPass;
}

const char* causeWord(SlotKind kind) {
  switch (kind) {
    case SlotKind::kGpuCount: return "gpu-count";
    case SlotKind::kValidated: return "validated";
    case SlotKind::kMemlock: return "memlock";
    case SlotKind::kP2P: return "p2p";
    case SlotKind::kOther: return "selector";
    case SlotKind::kCordoned: return "cordoned";
    case SlotKind::kTaint: return "taint";
    case SlotKind::kExclusive: return "node-exclusive";
  }
  return "selector";
}

// "node-a, node-b, node-c and 4 more"
std::string someNames(const std::vector<std::string>& names, std::size_t shown = 3) {
  std::vector<std::string> some(names.begin(), names.begin() + std::min(shown, names.size()));
  std::string out = joined(some);
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

std::string nodesWord(std::size_t n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

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

}  // namespace

namespace {

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

}  // namespace

bool waitsToBeExplained(const json& pod, long long now, long long graceSeconds) {
  const Wait w = waitOf(pod, now);
  return w.pending && w.age >= graceSeconds && !w.gated;
}

namespace {

// Every node sorted against the pod's requirements: the ones that meet all of them, and per
// requirement (slot) the nodes that fail it first, grouped by what they are instead.
struct NodeTally {
  std::vector<std::string> fit;
  std::vector<std::map<std::string, std::vector<std::string>>> failing;
  std::vector<std::size_t> failCount;
};

NodeTally tallyNodes(const Slots& s, const std::vector<std::vector<Requirement>>& terms,
                     const std::vector<NodeFacts>& nodes, const json& tolerations) {
  NodeTally t{{}, std::vector<std::map<std::string, std::vector<std::string>>>(s.slots.size()),
              std::vector<std::size_t>(s.slots.size(), 0)};
  for (const NodeFacts& n : nodes) {
    const std::size_t i = firstFailure(s, terms, n, tolerations);
    if (i == kPass) {
      t.fit.push_back(n.name);
      continue;
    }
    ++t.failCount[i];
    const std::string detail = detailOf(s.slots[i], n, tolerations);
    t.failing[i][s.slots[i].kind == SlotKind::kExclusive ? n.name + " runs " + detail : detail].push_back(n.name);
  }
  return t;
}

// "It needs a node that …": the requirements a user can read as asked of the pod.
std::string needsSentence(const Slots& s) {
  std::vector<std::string> needs;
  for (const Slot& slot : s.slots) {
    if (slot.kind == SlotKind::kCordoned || slot.kind == SlotKind::kTaint) continue;
    needs.push_back(needWords(slot));
  }
  if (needs.empty()) return "";
  std::string list;
  for (std::size_t i = 0; i < needs.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == needs.size() ? " and " : ", ") + needs[i];
  }
  return " It needs a node that " + list + ".";
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
      if (s.slots[i].kind == SlotKind::kExclusive || s.slots[i].kind == SlotKind::kCordoned) {
        examples.push_back(s.slots[i].kind == SlotKind::kCordoned ? someNames(byDetail[g].second) : byDetail[g].first);
      } else {
        examples.push_back(byDetail[g].first + ": " + someNames(byDetail[g].second));
      }
    }
    if (byDetail.size() > 3) examples.push_back("…");
    groups.push_back(std::to_string(t.failCount[i]) + " " + (t.failCount[i] == 1 ? one : many) + " (" +
                     joined(examples, "; ") + ")");
  }
  return groups;
}

// What the user can do, or what the scheduler says where podshaper's requirements are met.
std::string whatToDo(const json& pod, const Slots& s, const NodeTally& t, const std::vector<NodeFacts>& nodes) {
  if (!t.fit.empty()) {
    const std::string said = schedulerSays(pod);
    return " " + nodesWord(t.fit.size()) + " meet" + (t.fit.size() == 1 ? "s" : "") + " all of it (" +
           someNames(t.fit) + ")" +
           (said.empty() ? ": the scheduler has not said why it waits." : "; the scheduler says: " + said);
  }
  std::size_t gpuCountFailures = 0;
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    if (s.slots[i].kind == SlotKind::kGpuCount && t.failCount[i] > 0) gpuCountFailures = t.failCount[i];
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
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    if (t.failCount[i] == 0) continue;
    if (s.slots[i].kind == SlotKind::kExclusive) {
      out += " It starts when a node-exclusive pod named here ends.";
    } else if (s.slots[i].kind == SlotKind::kValidated) {
      // The largest group's first node: judged and failing, or never reported.
      const auto& [detail, names] = *std::max_element(
          t.failing[i].begin(), t.failing[i].end(),
          [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
      out += detail == "not judged by podshaper"
                 ? " podshaper-agent has not reported " + names.front() + " (is it running there?)."
                 : " kubectl describe gtr " + names.front() +
                       " (podshaper's report of that node's GPUs) says why it is not validated.";
    }
  }
  return out;
}

}  // namespace

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
  const auto terms = termsOf(spec);
  const Slots s = slotsOf(terms, nodeExclusive);
  const NodeTally t = tallyNodes(s, terms, nodes, member(spec, "tolerations"));

  std::string message = "Pending for " + ageWords(w.age) + ": ";
  message +=
      t.fit.empty() ? "no node can take this pod now." : "podshaper's requirements are met, yet no node took it.";
  message += needsSentence(s);
  if (nodes.empty()) {
    message += " The cluster has no node.";
  } else if (auto groups = failureGroups(s, t); !groups.empty()) {
    message += " Of " + nodesWord(nodes.size()) + ", " + joined(groups, "; ") + ".";
  }
  message += whatToDo(pod, s, t, nodes);
  // What stops the nodes that come closest: the last requirement any node fails.
  std::size_t closest = kPass;
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    if (t.failCount[i] > 0) closest = i;
  }
  out.cause = !t.fit.empty() || closest == kPass ? "scheduler" : causeWord(s.slots[closest].kind);
  out.answer = message.substr(message.find(": ") + 2);
  out.event = EventSpec{"Warning", reasons::kNotPlaceable, message};
  return out;
}

const char* toString(ShmCause cause) {
  switch (cause) {
    case ShmCause::kDataLoader: return "dataloader";
    case ShmCause::kNccl: return "nccl";
    case ShmCause::kSigbus: return "sigbus";
  }
  return "sigbus";
}

namespace {

bool containsNoCase(std::string_view hay, std::string_view needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         }) != hay.end();
}

// The first line of `message` for which `test` holds, trimmed to 200 bytes.
template <typename Test>
std::optional<std::string> lineWhere(const std::string& message, Test test) {
  std::size_t start = 0;
  while (start <= message.size()) {
    std::size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    std::string line = message.substr(start, end - start);
    if (test(line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      // A log line goes into an Event: no terminal control sequences.
      for (char& ch : line) {
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
      }
      return cutUtf8(std::move(line), 200);
    }
    start = end + 1;
  }
  return std::nullopt;
}

bool ncclLine(const std::string& l) {
  return containsNoCase(l, "Error while creating shared memory segment") ||
         (containsNoCase(l, "/dev/shm/nccl-") && containsNoCase(l, "No space left on device"));
}

bool dataLoaderLine(const std::string& l) {
  return containsNoCase(l, "insufficient shared memory") || containsNoCase(l, "out of shared memory") ||
         containsNoCase(l, "is killed by signal: Bus error") || containsNoCase(l, "bus error encountered in worker") ||
         (containsNoCase(l, "/torch_") && containsNoCase(l, "No space left on device"));
}

// What the training process says when it sees a worker gone, before (or without) the
// worker's own bus error line, which the log's 2 KiB tail may no longer hold.
bool workerGoneLine(const std::string& l) {
  return containsNoCase(l, "DataLoader worker (pid") && containsNoCase(l, "exited unexpectedly");
}

// A worker that died of something else: killed by another signal (Killed: the OOM killer
// at the memory limit; Segmentation fault, Aborted), or exited with a code (an exception).
bool otherWorkerDeath(const std::string& l) {
  return (containsNoCase(l, "is killed by signal:") && !containsNoCase(l, "Bus error")) ||
         containsNoCase(l, "exited unexpectedly with exit code");
}

// torchrun's line when a rank died of SIGBUS ("Signal 7 (SIGBUS) received by PID 42");
// the container itself then exits 1.
bool sigbusLine(const std::string& l) { return containsNoCase(l, "(SIGBUS)"); }

struct Cause {
  ShmCause cause;
  std::optional<std::string> line;
};

std::optional<Cause> classify(const json& terminated) {
  const json& code = member(terminated, "exitCode");
  const json& signal = member(terminated, "signal");
  const std::string message = stringMember(terminated, "message");
  if (auto l = lineWhere(message, ncclLine)) return Cause{ShmCause::kNccl, l};
  if (auto l = lineWhere(message, dataLoaderLine)) return Cause{ShmCause::kDataLoader, l};
  if (!lineWhere(message, otherWorkerDeath)) {
    if (auto l = lineWhere(message, workerGoneLine)) return Cause{ShmCause::kDataLoader, l};
  }
  if ((code.is_number_integer() && code.get<long long>() == 135) ||
      (signal.is_number_integer() && signal.get<long long>() == 7)) {
    return Cause{ShmCause::kSigbus, std::nullopt};
  }
  if (auto l = lineWhere(message, sigbusLine)) return Cause{ShmCause::kSigbus, l};
  return std::nullopt;
}

std::string shmFailureMessage(const json& pod, const std::string& container, const Cause& c, bool restarted,
                              long long run) {
  // The container's /dev/shm as the pod has it (the operator keeps the mounts and volumes
  // at /dev/shm): a volume of the user's, else podshaper's of shm-size.
  const std::optional<ShmVolumeInfo> volume = containerShmVolume(pod, container);
  const bool users = volume && !volume->isPodshapers();
  const std::string size =
      users ? volume->sizeAnnotation().value_or("") : annotation(pod, names::kShmSize).value_or("");
  const std::string formula = annotation(pod, names::kShmFormula).value_or("");
  std::string m = "Container \"" + container + "\" ran out of /dev/shm: ";
  switch (c.cause) {
    case ShmCause::kDataLoader: m += "a PyTorch DataLoader worker could not put its batch there"; break;
    case ShmCause::kNccl: m += "NCCL could not make its shared memory segment there"; break;
    case ShmCause::kSigbus:
      m += std::string(c.line ? "one of its processes was killed by SIGBUS" : "it was killed by SIGBUS (exit code 135)") +
           ", which in a training pod is most often a write into a full /dev/shm";
      break;
  }
  if (c.line) m += " (\"" + *c.line + "\")";
  m += ". ";
  if (users) {
    m += "/dev/shm is the pod's own " + volume->words() + ", not podshaper's.";
  } else {
    m += size.empty() ? std::string("Its /dev/shm size is not recorded.")
                      : "/dev/shm was " + size + ", sized by podshaper for what the pod's annotations say.";
  }
  const std::string dataLoaderAdvice = " set the pod's annotations " + std::string(names::kWorkers) + ", " +
                                       std::string(names::kPrefetchFactor) + " and " + std::string(names::kBatchBytes) + " (or " +
                                       std::string(names::kBatchShape) + " and " + std::string(names::kBatchDtype) +
                                       ") to what its DataLoader runs";
  const std::string ncclAdvice = " set the pod's annotation " + std::string(names::kNcclCommunicators) +
                                 " to the NCCL communicators the job makes (one per process group)";
  if (users) {
    switch (volume->kind) {
      case ShmVolumeInfo::Kind::kMemory:
      case ShmVolumeInfo::Kind::kDisk:
        m += volume->sizeLimit
                 ? " Raise the volume's sizeLimit (and the container's memory for it) to at least what the pod needs,"
                 : " The volume has no sizeLimit: its pages count against the container's memory limit; give it a "
                   "sizeLimit of at least what the pod needs and the container the memory for it,";
        break;
      case ShmVolumeInfo::Kind::kHostPath:
        m += " The host's /dev/shm is shared with every pod on the node and keeps what they and earlier runs left: "
             "free it,";
        break;
      case ShmVolumeInfo::Kind::kOther:
      case ShmVolumeInfo::Kind::kMissing:
        m += " Give the volume room for at least what the pod needs,";
        break;
    }
    m += " or drop the container's /dev/shm mount so that podshaper mounts one of that size.";
  }
  switch (c.cause) {
    case ShmCause::kDataLoader:
      m += " The DataLoader holds more than podshaper was told:" + dataLoaderAdvice + ".";
      break;
    case ShmCause::kNccl:
      m += " NCCL keeps more there than podshaper's NCCL reserve counts:" + ncclAdvice + ".";
      break;
    case ShmCause::kSigbus:
      m += " Either the DataLoader holds more than podshaper was told (" + dataLoaderAdvice.substr(1) +
           ") or NCCL keeps more than its reserve (" + ncclAdvice.substr(1) + ").";
      break;
  }
  if (restarted) {
    const bool host = users && volume->kind == ShmVolumeInfo::Kind::kHostPath;
    m += " This was run " + std::to_string(run + 1) + " of the container in this pod: /dev/shm is " +
         (host ? "the host's" : "the pod's emptyDir") +
         " and keeps what earlier runs left (a crashed NCCL's segments, a DataLoader's files), so this run started "
         "with less than " + (size.empty() ? std::string("its size") : size) +
         ": let the pod be replaced rather than restarted in place (restartPolicy: Never; a Job's backoffLimit " +
         "makes a new pod).";
  }
  if (!formula.empty()) m += " The size: " + formula + ".";
  return m;
}

// The kubelet's cut of a log into a termination message (FallbackToLogsOnError): the last
// 80 lines, at most 2048 bytes. A message near either was likely cut.
constexpr std::size_t kMessageBytes = 2048, kMessageLines = 80;

bool wasCut(const std::string& message) {
  return message.size() + 64 >= kMessageBytes ||
         static_cast<std::size_t>(std::count(message.begin(), message.end(), '\n')) + 1 >= kMessageLines;
}

// Each run that ended, now (its index is the restart count) or the one before.
template <typename Visit>
void forEachEndedRun(const json& pod, Visit visit) {
  const json& status = member(pod, "status");
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    for (const json& cs : member(status, list)) {
      const long long restarts =
          member(cs, "restartCount").is_number_integer() ? member(cs, "restartCount").get<long long>() : 0;
      for (const auto& [state, run] : {std::pair<const char*, long long>{"state", restarts},
                                       std::pair<const char*, long long>{"lastState", restarts - 1}}) {
        const json& terminated = member(member(cs, state), "terminated");
        if (!terminated.is_object() || run < 0) continue;
        const json& code = member(terminated, "exitCode");
        if (code.is_number_integer() && code.get<long long>() == 0) continue;
        visit(stringMember(cs, "name"), terminated, run, std::string_view(state) == "lastState");
      }
    }
  }
}

std::string runKey(const json& pod, const std::string& container, long long run) {
  return stringMember(member(pod, "metadata"), "uid") + "/" + container + "/" + std::to_string(run);
}

}  // namespace

std::vector<LogToRead> logsToRead(const json& pod) {
  std::vector<LogToRead> out;
  forEachEndedRun(pod, [&](const std::string& name, const json& terminated, long long run, bool previous) {
    // The OOM killer's and the kubelet's own ends say what they are; a message the
    // container wrote itself is short.
    if (stringMember(terminated, "reason") != "Error" || classify(terminated)) return;
    if (!wasCut(stringMember(terminated, "message"))) return;
    out.push_back(LogToRead{name, previous, runKey(pod, name, run)});
  });
  return out;
}

// What shmEvidence keeps at most: enough for every line judgeTerminations may quote.
constexpr std::size_t kEvidenceBytes = 8192;

std::string shmEvidence(const std::string& log) {
  std::string kept;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    if (ncclLine(line) || dataLoaderLine(line) || workerGoneLine(line) || otherWorkerDeath(line) || sigbusLine(line)) {
      if (kept.size() + line.size() >= kEvidenceBytes) break;
      kept += line;
      kept += '\n';
    }
    start = end + 1;
  }
  return kept;
}

std::vector<ShmFailure> judgeTerminations(const json& pod, const std::map<std::string, std::string>& logs) {
  std::vector<ShmFailure> out;
  const std::string uid = stringMember(member(pod, "metadata"), "uid");
  forEachEndedRun(pod, [&](const std::string& name, const json& terminated, long long run, bool) {
    auto cause = classify(terminated);
    if (!cause) {
      auto log = logs.find(runKey(pod, name, run));
      if (log == logs.end()) return;
      json withLog = terminated;
      withLog["message"] = log->second;
      cause = classify(withLog);
      if (!cause) return;
    }
    ShmFailure f;
    f.container = name;
    f.cause = cause->cause;
    f.restarted = run >= 1;
    f.key = uid + "/" + name + "/" + (f.restarted ? "restarted" : "first") + "/" + toString(f.cause);
    f.event = EventSpec{"Warning", reasons::kShmExhausted, shmFailureMessage(pod, name, *cause, f.restarted, run)};
    if (std::none_of(out.begin(), out.end(), [&](const ShmFailure& o) { return o.key == f.key; })) {
      out.push_back(std::move(f));
    }
  });
  return out;
}

std::optional<ObjectRef> controllerOf(const json& pod) {
  for (const json& ref : member(member(pod, "metadata"), "ownerReferences")) {
    if (member(ref, "controller") != true) continue;
    return ObjectRef{stringMember(ref, "apiVersion"), stringMember(ref, "kind"), stringMember(ref, "name"),
                     stringMember(ref, "uid"), stringMember(member(pod, "metadata"), "namespace")};
  }
  return std::nullopt;
}

EventSpec ownerEvent(const json& pod, const ShmFailure& failure) {
  const json& meta = member(pod, "metadata");
  EventSpec e = failure.event;
  e.message = "Pod " + stringMember(meta, "namespace") + "/" + stringMember(meta, "name") + ": " + e.message;
  return e;
}

}  // namespace podshaper
