#include "shaping/node_requirements_text.h"

namespace podshaper {

const std::vector<std::vector<JsonText>>& NodeRequirementsText::of(const NodeAsk& ask) {
  if (last_ == ask) return terms_;
  terms_.clear();
  for (const auto& term : nodeRequirements(ask)) {
    std::vector<JsonText> requirements;
    for (const NodeRequirement& r : term) requirements.emplace_back(r.toJson());
    terms_.push_back(std::move(requirements));
  }
  last_ = ask;
  return terms_;
}

}  // namespace podshaper
