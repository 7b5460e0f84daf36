#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace podshaper::kube {

// Exponential backoff with jitter: the step doubles from `initial` up to `cap`,
// and each delay is drawn from [step × (1 − jitter), step], so that many
// clients failing together (an API server restart) do not come back together,
// and no delay exceeds the cap.
class Backoff {
 public:
  explicit Backoff(std::chrono::milliseconds initial = std::chrono::milliseconds(500),
                   std::chrono::milliseconds cap = std::chrono::seconds(30), double jitter = 0.5,
                   std::uint64_t seed = std::random_device{}());

  std::chrono::milliseconds next();
  void reset() { step_ = initial_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds cap_;
  std::chrono::milliseconds step_;
  double jitter_;
  std::mt19937_64 rng_;
};

}  // namespace podshaper::kube
