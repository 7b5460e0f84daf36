#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

// Equal strings kept once. A cluster's Nodes carry the same label keys, and mostly the same
// values, on every node (about 80 on a GPU node, most longer than a std::string holds
// inline): kept per node they were most of the operator's memory at 12,500 nodes.
// Not thread-safe: its owner locks. A string handed out lives as long as someone holds
// it; the pool forgets the ones nobody holds when it has grown to twice what it last kept.
namespace podshaper {

using SharedString = std::shared_ptr<const std::string>;

class StringPool {
 public:
  SharedString intern(std::string_view text) {
    if (auto it = strings_.find(text); it != strings_.end()) return it->second;
    auto shared = std::make_shared<const std::string>(text);
    strings_.emplace(std::string_view(*shared), shared);  // the key views the string it keeps
    if (strings_.size() >= sweepAt_) sweep();
    return shared;
  }
  std::size_t size() const { return strings_.size(); }

 private:
  // Drops the strings only the pool holds (use_count 1: nobody else can copy it meanwhile,
  // as nobody else has it).
  void sweep() {
    std::erase_if(strings_, [](const auto& entry) { return entry.second.use_count() == 1; });
    sweepAt_ = std::max<std::size_t>(kMinSweep, 2 * strings_.size());
  }
  static constexpr std::size_t kMinSweep = 4096;
  std::unordered_map<std::string_view, SharedString> strings_;
  std::size_t sweepAt_ = kMinSweep;
};

}  // namespace podshaper
