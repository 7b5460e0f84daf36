#include "core/shm.h"

#include <array>
#include <limits>
#include <utility>

#include "core/checked.h"
#include "core/quantity.h"

namespace podshaper {
namespace {

constexpr std::array<std::pair<std::string_view, uint64_t>, 15> kDtypes{{
    {"float64", 8}, {"double", 8}, {"float32", 4}, {"float", 4}, {"float16", 2}, {"half", 2},
    {"bfloat16", 2}, {"int64", 8}, {"long", 8}, {"int32", 4}, {"int", 4}, {"int16", 2},
    {"int8", 1}, {"uint8", 1}, {"bool", 1},
}};

Error overflow(std::string_view what) {
  return makeError("the /dev/shm size overflows 64 bits at " + std::string(what) +
                   "; check the batch size, workers, prefetch factor and ranks");
}

}  // namespace

Result<uint64_t> dtypeBytes(std::string_view dtype) {
  std::string_view name = dtype;
  if (name.starts_with("torch.")) name.remove_prefix(6);
  for (const auto& [n, size] : kDtypes) {
    if (n == name) return size;
  }
  return makeError("unknown dtype \"" + std::string(dtype) +
                   "\" (use one of float64, float32, float16, bfloat16, int64, int32, int16, "
                   "int8, uint8, bool)");
}

Result<uint64_t> shapeBytes(std::string_view shape, std::string_view dtype) {
  auto element = dtypeBytes(dtype);
  if (!element) return element.error();
  uint64_t total = *element;
  std::string_view rest = shape;
  if (rest.empty()) return makeError("shape is empty (expected e.g. 32x3x224x224)");
  while (true) {
    std::size_t x = rest.find('x');
    std::string_view dim = rest.substr(0, x);
    auto n = parseCount(dim);
    if (!n) {
      return makeError("shape \"" + std::string(shape) + "\": dimension " + n.error().message +
                       " (expected e.g. 32x3x224x224)");
    }
    if (*n == 0) return makeError("shape \"" + std::string(shape) + "\" has a zero dimension");
    auto product = checkedMul(total, *n);
    if (!product) return makeError("shape \"" + std::string(shape) + "\" overflows 64 bits");
    total = *product;
    if (x == std::string_view::npos) break;
    rest = rest.substr(x + 1);
  }
  return total;
}

Result<ShmPlan> planShm(const ShmInputs& in) {
  ShmPlan plan;
  auto batchesPerRank = checkedMul(in.workers, in.prefetchFactor);
  if (!batchesPerRank || !(batchesPerRank = checkedAdd(*batchesPerRank, 1))) {
    return overflow("workers × prefetch");
  }
  auto perRank = checkedMul(*batchesPerRank, in.batch.bytes);
  if (!perRank) return overflow("per-rank bytes");
  auto payload = checkedMul(in.ranks, *perRank);
  if (!payload) return overflow("ranks × per-rank bytes");
  auto scaled = checkedMul(*payload, 100 + in.headroomPercent);
  if (!scaled) return overflow("headroom");
  uint64_t withHeadroom = *scaled / 100 + (*scaled % 100 != 0 ? 1 : 0);
  auto reserve = checkedMul(in.ranks, in.ncclReservePerRank);
  if (!reserve) return overflow("NCCL reserve");
  auto totalMiB = checkedAdd(ceilMiB(withHeadroom), ceilMiB(*reserve));
  if (!totalMiB) return overflow("total");
  auto shm = checkedMul(*totalMiB, kMiB);
  if (!shm || *shm > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return overflow("total");
  }

  plan.perRankBytes = *perRank;
  plan.payloadBytes = *payload;
  plan.withHeadroomBytes = withHeadroom;
  plan.ncclReserveBytes = *reserve;
  plan.shmBytes = *shm;

  std::string f = std::to_string(in.ranks) + " ranks × (" + std::to_string(in.workers) +
                  " workers × prefetch " + std::to_string(in.prefetchFactor) + " + 1) × " +
                  std::to_string(in.batch.bytes) + " B (" + in.batch.source + ") = " +
                  std::to_string(plan.payloadBytes) + " B; +" +
                  std::to_string(in.headroomPercent) + "% headroom = " +
                  std::to_string(plan.withHeadroomBytes) + " B → " +
                  std::to_string(ceilMiB(withHeadroom)) + "Mi";
  if (in.ncclReservePerRank == 0) {
    f += "; no NCCL shm reserve";
  } else {
    f += "; + NCCL shm reserve " + std::to_string(in.ranks) + " × " +
         formatBytes(static_cast<int64_t>(in.ncclReservePerRank)) + " = " +
         std::to_string(ceilMiB(*reserve)) + "Mi";
  }
  f += "; /dev/shm = " + formatBytes(static_cast<int64_t>(plan.shmBytes));
  plan.formula = std::move(f);
  return plan;
}

}  // namespace podshaper
