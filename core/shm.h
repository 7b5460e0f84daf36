#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace podshaper {

// The bytes one DataLoader batch takes: a count and where it came from.
struct BatchSize {
  uint64_t bytes = 0;
  std::string source;  // "batch-bytes 18Mi" or "batch-shape 32x3x224x224 float32"
};

// Element size of a PyTorch dtype name ("float32", "bfloat16", "torch.uint8", ...).
Result<uint64_t> dtypeBytes(std::string_view dtype);
// "32x3x224x224" × dtype → bytes, overflow-checked.
Result<uint64_t> shapeBytes(std::string_view shape, std::string_view dtype);

struct ShmInputs {
  uint64_t ranks = 1;
  uint64_t workers = 0;
  uint64_t prefetchFactor = 2;
  BatchSize batch;
  uint64_t headroomPercent = 20;
  uint64_t ncclReservePerRank = 0;  // bytes; 0 when the target nodes have P2P between all GPUs
};

// DESIGN.md "The /dev/shm size":
//   per_rank = (workers × prefetch + 1) × batch_bytes
//   shm      = ceil_MiB(ceil(ranks × per_rank × (100 + headroom) / 100)) + ceil_MiB(ranks × reserve)
struct ShmPlan {
  uint64_t perRankBytes = 0;
  uint64_t payloadBytes = 0;      // ranks × per_rank
  uint64_t withHeadroomBytes = 0;
  uint64_t ncclReserveBytes = 0;  // ranks × reserve per rank, before rounding
  uint64_t shmBytes = 0;          // a whole number of MiB
  std::string formula;            // the numbers above in words
};

Result<ShmPlan> planShm(const ShmInputs& in);

}  // namespace podshaper
