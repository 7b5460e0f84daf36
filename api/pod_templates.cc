#include "api/pod_templates.h"

#include <cctype>

#include "base/json_util.h"

namespace podshaper {
namespace {

constexpr int kMaxDepth = 32;

bool isPodTemplate(const nlohmann::json& value) {
  return member(member(value, "spec"), "containers").is_array();
}

// A key as a path segment: a plain name after a dot, anything else quoted in brackets.
std::string segment(const std::string& key) {
  bool plain = !key.empty();
  for (char c : key) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') plain = false;
  }
  return plain ? "." + key : "[\"" + key + "\"]";
}

void find(const nlohmann::json& value, const nlohmann::json::json_pointer& pointer, const std::string& where,
          int depth, std::vector<PodTemplateAt>& out);

// One member or element: a template is taken whole, anything else is looked into.
void visit(const nlohmann::json& child, const nlohmann::json::json_pointer& pointer, const std::string& where,
           int depth, std::vector<PodTemplateAt>& out) {
  if (isPodTemplate(child)) out.push_back({pointer, where});
  else find(child, pointer, where, depth + 1, out);
}

void find(const nlohmann::json& value, const nlohmann::json::json_pointer& pointer, const std::string& where,
          int depth, std::vector<PodTemplateAt>& out) {
  if (depth > kMaxDepth) return;
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      // The workload's own metadata and status hold no template.
      if (depth == 0 && (key == "metadata" || key == "status")) continue;
      visit(child, pointer / key, where.empty() ? key : where + segment(key), depth, out);
    }
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      visit(value[i], pointer / i, where + "[" + std::to_string(i) + "]", depth, out);
    }
  }
}

}  // namespace

std::vector<PodTemplateAt> podTemplates(const nlohmann::json& object) {
  std::vector<PodTemplateAt> out;
  if (stringMember(object, "kind") == "Pod") {
    out.push_back({nlohmann::json::json_pointer(), ""});
    return out;
  }
  find(object, nlohmann::json::json_pointer(), "", 0, out);
  return out;
}

}  // namespace podshaper
