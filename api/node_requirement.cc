#include "api/node_requirement.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "base/json_util.h"

namespace podshaper {
namespace {

constexpr std::pair<MatchOp, std::string_view> kOps[] = {
    {MatchOp::kIn, "In"},   {MatchOp::kNotIn, "NotIn"}, {MatchOp::kExists, "Exists"}, {MatchOp::kDoesNotExist, "DoesNotExist"},
    {MatchOp::kGt, "Gt"},   {MatchOp::kLt, "Lt"}};

// As the scheduler reads a Gt/Lt operand (strconv.ParseInt(s, 10, 64)).
std::optional<int64_t> int64Of(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [at, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || at != end) return std::nullopt;
  return value;
}

}  // namespace

std::string_view toString(MatchOp op) {
  for (const auto& [o, text] : kOps) {
    if (o == op) return text;
  }
  return "In";
}

std::optional<MatchOp> parseMatchOp(std::string_view text) {
  for (const auto& [op, t] : kOps) {
    if (t == text) return op;
  }
  return std::nullopt;
}

bool NodeRequirement::matches(const std::string* value) const {
  const bool in = value != nullptr && std::find(values.begin(), values.end(), *value) != values.end();
  switch (op) {
    case MatchOp::kIn: return in;
    case MatchOp::kNotIn: return !in;
    case MatchOp::kExists: return value != nullptr;
    case MatchOp::kDoesNotExist: return value == nullptr;
    case MatchOp::kGt:
    case MatchOp::kLt: {
      if (value == nullptr || values.size() != 1) return false;
      auto have = int64Of(*value);
      auto bound = int64Of(values.front());
      if (!have || !bound) return false;
      return op == MatchOp::kGt ? *have > *bound : *have < *bound;
    }
  }
  return false;
}

std::string NodeRequirement::words() const {
  if (op == MatchOp::kIn && values.size() == 1) return key + "=" + values.front();
  if (op == MatchOp::kExists || op == MatchOp::kDoesNotExist) return key + " " + std::string(toString(op));
  std::string list;
  for (const auto& v : values) list += (list.empty() ? "" : ", ") + v;
  return key + " " + std::string(toString(op)) + " [" + list + "]";
}

nlohmann::json NodeRequirement::toJson() const {
  nlohmann::json out = {{"key", key}, {"operator", toString(op)}};
  if (!values.empty() || op == MatchOp::kIn || op == MatchOp::kNotIn) out["values"] = values;
  return out;
}

NodeRequirement labelIs(std::string_view key, std::string value) {
  return {std::string(key), MatchOp::kIn, {std::move(value)}};
}

NodeRequirement requirementFromJson(const nlohmann::json& requirement, bool field) {
  NodeRequirement r;
  r.key = stringMember(requirement, "key");
  r.field = field;
  // An operator the scheduler does not know stays In of nothing, which no node matches: the
  // API server refuses such a pod, and the scheduler places none.
  auto op = parseMatchOp(stringMember(requirement, "operator"));
  if (!op) return r;
  r.op = *op;
  for (const nlohmann::json& v : member(requirement, "values")) {
    if (v.is_string()) r.values.push_back(v.get<std::string>());
  }
  return r;
}

std::vector<std::vector<NodeRequirement>> podNodeTerms(const nlohmann::json& podSpec) {
  auto requirementsOf = [](const nlohmann::json& expressions, bool field) {
    std::vector<NodeRequirement> out;
    if (!expressions.is_array()) return out;
    for (const nlohmann::json& e : expressions) out.push_back(requirementFromJson(e, field));
    return out;
  };
  std::vector<NodeRequirement> selector;
  const nlohmann::json& nodeSelector = member(podSpec, "nodeSelector");
  if (nodeSelector.is_object()) {
    for (const auto& [k, v] : nodeSelector.items()) {
      selector.push_back(labelIs(k, v.is_string() ? v.get<std::string>() : v.dump()));
    }
  }
  std::vector<std::vector<NodeRequirement>> terms;
  const nlohmann::json& required = member(member(member(podSpec, "affinity"), "nodeAffinity"),
                                          "requiredDuringSchedulingIgnoredDuringExecution");
  for (const nlohmann::json& term : member(required, "nodeSelectorTerms")) {
    auto reqs = requirementsOf(member(term, "matchExpressions"), false);
    auto fields = requirementsOf(member(term, "matchFields"), true);
    reqs.insert(reqs.end(), fields.begin(), fields.end());
    reqs.insert(reqs.end(), selector.begin(), selector.end());
    terms.push_back(std::move(reqs));
  }
  if (terms.empty()) terms.push_back(selector);
  return terms;
}

}  // namespace podshaper
