// The webhook's whole request path: an AdmissionReview body in, through
// decoding, pod shaping and the JSON Patch, under each fuzz setting (default
// config on a validated cluster, no cluster, expand/warn config on a cluster
// without the operator). Invariants: fuzz/admission_checks.h.

#include <cstddef>
#include <cstdint>

#include "fuzz/admission_checks.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body = podshaper::fuzz::asText(data, size);
  for (const auto& setting : podshaper::fuzz::fuzzSettings()) {
    podshaper::fuzz::checkAdmission(body, setting.config, setting.cluster);
  }
  return 0;
}
