#pragma once

#include <optional>
#include <vector>

#include "api/node_labels.h"
#include "base/json_edit.h"

namespace podshaper {

// The node requirements a shaped pod's node affinity carries (api/node_labels.h), as
// JSON with its text, one list per nodeSelectorTerm; the last ones made are kept: the pods
// one webhook thread answers ask the same few things, and these are a dozen JSON values
// (the webhook's AdmissionScratch keeps one per thread).
class NodeRequirementsText {
 public:
  const std::vector<std::vector<JsonText>>& of(const NodeAsk& ask);

 private:
  std::optional<NodeAsk> last_;
  std::vector<std::vector<JsonText>> terms_;
};

}  // namespace podshaper
