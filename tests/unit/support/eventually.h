#pragma once
// Waiting, in a unit test, for what the code under test does on its own threads.

#include <chrono>
#include <functional>
#include <thread>

namespace podshaper::support {

// Polls `condition` every 10 ms until it holds (true) or `within` has passed (false). The
// limit is generous by default: only a failing test waits it out, and a sanitizer's build
// on a busy machine is slow.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds within = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace podshaper::support
