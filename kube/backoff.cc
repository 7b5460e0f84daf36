#include "kube/backoff.h"

#include <algorithm>

namespace podshaper::kube {

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds cap, double jitter, std::uint64_t seed)
    : initial_(std::max(initial, std::chrono::milliseconds(1))),
      cap_(std::max(cap, initial_)),
      step_(initial_),
      jitter_(std::clamp(jitter, 0.0, 1.0)),
      rng_(seed) {}

std::chrono::milliseconds Backoff::next() {
  const auto step = std::min(step_, cap_);
  std::uniform_real_distribution<double> fraction(1.0 - jitter_, 1.0);
  const auto delay = std::chrono::milliseconds(static_cast<long long>(static_cast<double>(step.count()) * fraction(rng_)));
  step_ = std::min(step * 2, cap_);
  return std::max(delay, std::chrono::milliseconds(1));
}

}  // namespace podshaper::kube
