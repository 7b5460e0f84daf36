#include "judging/plan.h"

#include "api/names.h"
#include "base/json_util.h"

namespace podshaper {
namespace {

using nlohmann::json;

std::string metaString(const json& object, const char* key) { return stringMember(member(object, "metadata"), key); }

long long generationOf(const json& object) {
  if (!object.is_object() || !object.contains("metadata")) return 0;
  const json& m = object["metadata"];
  return m.is_object() && m.contains("generation") && m["generation"].is_number_integer()
             ? m["generation"].get<long long>()
             : 0;
}

// The Node hears of problems; that a node is fine is the report's to say (at
// 5,000 nodes a Normal per Node was a quarter of the writes of a cold start).
std::vector<PlannedEvent> eventsFor(const json& report, const json* node, const json& currentStatus,
                                    const Verdict& verdict) {
  std::vector<PlannedEvent> planned;
  const ObjectRef reportRef{std::string(names::kGroupVersion), std::string(names::kReportKind),
                            metaString(report, "name"), metaString(report, "uid")};
  for (const auto& e : transitionEvents(currentStatus, verdict)) {
    planned.push_back({reportRef, e});
    if (node != nullptr && e.type == "Warning") {
      planned.push_back({{"v1", "Node", metaString(*node, "name"), metaString(*node, "uid")}, e});
    }
  }
  return planned;
}

// Splits the Node's changes into its writes: the labels go with the condition to the
// status subresource, unless the taint changes (the status subresource keeps the spec).
void planNodeWrites(Plan& p, json labelsAndTaint, json condition) {
  if (labelsAndTaint.is_object() && !labelsAndTaint.contains("spec")) {
    if (condition.is_null()) condition = json::object();
    condition["metadata"] = std::move(labelsAndTaint["metadata"]);
    labelsAndTaint = nullptr;
  }
  p.nodePatch = std::move(labelsAndTaint);
  p.nodeStatusPatch = std::move(condition);
}

}  // namespace

bool ownedByNode(const json& report) {
  const json* refs = report.contains("metadata") && report["metadata"].is_object() &&
                             report["metadata"].contains("ownerReferences") &&
                             report["metadata"]["ownerReferences"].is_array()
                         ? &report["metadata"]["ownerReferences"]
                         : nullptr;
  if (refs == nullptr) return false;
  for (const auto& r : *refs) {
    if (r.is_object() && r.value("kind", json()) == "Node") return true;
  }
  return false;
}

json reportSpecOf(const json& report) {
  if (!report.is_object() || !report.contains("spec")) return nullptr;
  const json& spec = report["spec"];
  if (!spec.is_string()) return spec;
  json parsed = json::parse(spec.get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? json(nullptr) : parsed;
}

Plan plan(const PlanInputs& in) {
  Plan p;
  if (in.report == nullptr) {
    p.kind = Plan::Kind::ReportGone;
    if (in.node != nullptr) {
      planNodeWrites(p, nodePatch(*in.node, nullptr), nodeConditionPatch(*in.node, nullptr, in.now));
    }
    return p;
  }
  const json& report = *in.report;
  if (in.node == nullptr && ownedByNode(report) && in.nodeMissingFor < kNodeGoneGraceSeconds) {
    p.kind = Plan::Kind::NodeGoing;
    p.requeueAfter = kNodeGoneGraceSeconds - in.nodeMissingFor;
    return p;
  }

  std::optional<Node> node;
  if (in.node != nullptr) node = nodeFromJson(*in.node);
  static const std::vector<Policy> kNoPolicies;
  static const std::vector<MemlockHeld> kNoneHeld;
  const Verdict& verdict = p.verdict.emplace(judge(reportSpecOf(report), node ? &*node : nullptr,
                                                   in.policies != nullptr ? *in.policies : kNoPolicies, in.now,
                                                   in.memlockHeld != nullptr ? *in.memlockHeld : kNoneHeld));

  const json current = report.contains("status") ? report["status"] : json(nullptr);
  const json next = reportStatus(verdict, current, generationOf(report), in.now);
  if (statusChanged(current, next)) {
    p.statusPatch = {{"metadata", {{"resourceVersion", metaString(report, "resourceVersion")}}}, {"status", next}};
    p.events = eventsFor(report, in.node, current, verdict);
  }
  if (in.node != nullptr) {
    planNodeWrites(p, nodePatch(*in.node, &verdict), nodeConditionPatch(*in.node, &verdict, in.now));
  }
  if (verdict.staleAt) p.requeueAfter = *verdict.staleAt - in.now;
  return p;
}

}  // namespace podshaper
