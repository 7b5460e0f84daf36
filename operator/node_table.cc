#include "operator/node_table.h"

#include <algorithm>

namespace podshaper::op {

void NodeTable::changed(const std::vector<std::string>& names) {
  std::lock_guard lock(dirtyMu_);
  dirty_.insert(names.begin(), names.end());
}

std::shared_ptr<const std::vector<NodeFacts>> NodeTable::snapshot() {
  std::lock_guard lock(mu_);
  std::set<std::string> names;
  {
    std::lock_guard dirty(dirtyMu_);
    names.swap(dirty_);
  }
  if (names.empty()) return facts_;
  // A snapshot someone still holds stays as it was.
  if (facts_.use_count() > 1) facts_ = std::make_shared<std::vector<NodeFacts>>(*facts_);
  std::vector<NodeFacts>& facts = *facts_;
  for (const std::string& name : names) {
    auto at = std::lower_bound(facts.begin(), facts.end(), name,
                               [](const NodeFacts& f, const std::string& n) { return f.node.name < n; });
    const bool held = at != facts.end() && at->node.name == name;
    auto node = readNode_(name);
    ++reads_;
    if (!node) {
      if (held) facts.erase(at);
      continue;
    }
    auto report = readReport_(name);
    ++reads_;
    NodeFacts f = nodeFactsOf(*node, report ? &*report : nullptr, strings_);
    f.node.name = name;  // the key it is kept by
    if (held) {
      *at = std::move(f);
    } else {
      facts.insert(at, std::move(f));
    }
  }
  return facts_;
}

std::size_t NodeTable::reads() const {
  std::lock_guard lock(mu_);
  return reads_;
}

}  // namespace podshaper::op
