#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace podshaper {

// Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource) as a
// whole number of units, rounded up like Quantity.Value(): "18Mi", "1.5Gi",
// "100M", "1e9", "500m" (→ 1). Negative values and values beyond int64 are errors.
Result<int64_t> parseQuantity(std::string_view text);

// A byte count in the most compact exact binary form: 5822Mi, 100Gi, 1536Ki, 1000.
std::string formatBytes(int64_t bytes);

// A strict non-negative decimal integer: digits only, no sign, no spaces.
Result<uint64_t> parseCount(std::string_view text);

}  // namespace podshaper
