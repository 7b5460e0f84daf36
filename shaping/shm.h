#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "shaping/nccl.h"

namespace podshaper {

// The bytes one DataLoader batch takes: a count and where it came from.
struct BatchSize {
  uint64_t bytes = 0;
  std::string source;  // "batch-bytes 18Mi" or "batch-shape 32x3x224x224 float32"
};

// Element size of a PyTorch dtype name ("float32", "bfloat16", "torch.float8_e4m3fn", ...).
Result<uint64_t> dtypeBytes(std::string_view dtype);
// "32x3x224x224" × dtype → bytes, overflow-checked.
Result<uint64_t> shapeBytes(std::string_view shape, std::string_view dtype);

// Batches a rank's DataLoader holds in /dev/shm beyond its workers × prefetch slots: the
// one being handed to the training loop and the one the training step still holds
// (measured with Debian's torch 1.13, tests/shm).
inline constexpr uint64_t kHeldBatches = 2;
// Per rank with workers, beside its batches: the DataLoader's queue and lock semaphores
// (a 4 KiB page each, 3 per worker and 8 more) and each batch's tensors rounded up to pages.
inline constexpr uint64_t kDataLoaderExtraBytes = 1ULL << 20;
// /dev/shm is never shaped below the container runtime's default.
inline constexpr uint64_t kMinShmBytes = 64ULL << 20;

struct ShmInputs {
  uint64_t ranks = 1;
  uint64_t workers = 0;
  uint64_t prefetchFactor = 2;
  BatchSize batch;
  uint64_t headroomPercent = 20;
  NcclReserve nccl;  // communicators per rank, the bytes of each, and why
};

// docs/webhook.md "The /dev/shm formula":
//   per_rank = (workers × prefetch + 2) × batch_bytes + 1Mi      (0 with no workers)
//   shm      = max(64Mi, ceil_MiB(ceil(ranks × per_rank × (100 + headroom) / 100))
//                        + ceil_MiB(ranks × communicators × per_communicator))
struct ShmPlan {
  uint64_t perRankBytes = 0;
  uint64_t payloadBytes = 0;      // ranks × per_rank
  uint64_t withHeadroomBytes = 0;
  uint64_t ncclReserveBytes = 0;  // ranks × communicators × per communicator, before rounding
  NcclTransport ncclTransport = NcclTransport::kNone;  // what the reserve was sized for
  uint64_t shmBytes = 0;          // a whole number of MiB
  std::string formula;            // the numbers above in words
};

// ranksFrom: where the ranks came from, for an error's words ("podshaper.io/ranks-per-pod").
Result<ShmPlan> planShm(const ShmInputs& in, std::string_view ranksFrom = {});

}  // namespace podshaper
