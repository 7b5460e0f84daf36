#include "shaping/shm.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include "api/names.h"
#include "base/checked.h"
#include "base/quantity.h"
#include "base/text.h"
#include "shaping/request_limits.h"

namespace podshaper {
namespace {

struct Dtype {
  std::string_view name;
  uint64_t bytes;
  bool alias;  // PyTorch's other name for a dtype listed before it; not listed in errors
};

// Every dtype of torch 2.x whose elements are whole bytes (torch.<name>.itemsize);
// float4_e2m1fn_x2 packs two 4-bit values into one element.
constexpr std::array<Dtype, 31> kDtypes{{
    {"float64", 8, false}, {"double", 8, true},
    {"float32", 4, false}, {"float", 4, true},
    {"float16", 2, false}, {"half", 2, true},
    {"bfloat16", 2, false},
    {"float8_e4m3fn", 1, false}, {"float8_e4m3fnuz", 1, false},
    {"float8_e5m2", 1, false}, {"float8_e5m2fnuz", 1, false},
    {"float8_e8m0fnu", 1, false}, {"float4_e2m1fn_x2", 1, false},
    {"complex128", 16, false}, {"cdouble", 16, true},
    {"complex64", 8, false}, {"cfloat", 8, true},
    {"complex32", 4, false}, {"chalf", 4, true},
    {"int64", 8, false}, {"long", 8, true},
    {"int32", 4, false}, {"int", 4, true},
    {"int16", 2, false}, {"short", 2, true},
    {"int8", 1, false},
    {"uint64", 8, false}, {"uint32", 4, false}, {"uint16", 2, false}, {"uint8", 1, false},
    {"bool", 1, false},
}};

std::string dtypeNames() {
  std::string names;
  for (const Dtype& d : kDtypes) {
    if (d.alias) continue;
    names += (names.empty() ? "" : ", ") + std::string(d.name);
  }
  return names;
}

std::string bytesText(uint64_t b) { return formatBytes(static_cast<int64_t>(b)); }

}  // namespace

Result<uint64_t> dtypeBytes(std::string_view dtype) {
  std::string_view name = dtype;
  if (name.starts_with("torch.")) name.remove_prefix(6);
  for (const Dtype& d : kDtypes) {
    if (d.name == name) return d.bytes;
  }
  return makeError("unknown dtype " + inQuotes(dtype, 64) + " (use one of " + dtypeNames() +
                   ", or give " + std::string(names::kBatchBytes) + ")");
}

Result<uint64_t> shapeBytes(std::string_view shape, std::string_view dtype) {
  auto element = dtypeBytes(dtype);
  if (!element) return element.error();
  uint64_t total = *element;
  std::string_view rest = shape;
  if (rest.empty()) return makeError("shape is empty (expected e.g. 32x3x224x224)");
  const std::string quoted = inQuotes(shape, 64);
  if (std::size_t dims = std::count(shape.begin(), shape.end(), 'x') + 1; dims > kMaxBatchDimensions) {
    return makeError("shape " + quoted + " has " + std::to_string(dims) + " dimensions; at most " +
                     std::to_string(kMaxBatchDimensions) + " (expected e.g. 32x3x224x224)");
  }
  while (true) {
    std::size_t x = rest.find('x');
    std::string_view dim = rest.substr(0, x);
    auto n = parseCount(dim);
    if (!n) {
      return makeError("shape " + quoted + ": dimension " + n.error().message +
                       " (expected e.g. 32x3x224x224)");
    }
    if (*n == 0) return makeError("shape " + quoted + " has a zero dimension");
    auto product = checkedMul(total, *n);
    if (!product) return makeError("shape " + quoted + " overflows 64 bits");
    total = *product;
    if (x == std::string_view::npos) break;
    rest = rest.substr(x + 1);
  }
  return total;
}

Result<ShmPlan> planShm(const ShmInputs& in, std::string_view ranksFrom) {
  // Past 64 bits: every input with its value, so the one that is wrong shows (a GPU count
  // as much as a batch size).
  auto overflow = [&in, ranksFrom]() -> Error {
    std::string inputs = counted(in.ranks, "rank") + (ranksFrom.empty() ? "" : " (" + std::string(ranksFrom) + ")");
    if (in.workers > 0) {
      inputs += " × ((" + counted(in.workers, "worker") + " × prefetch " + std::to_string(in.prefetchFactor) +
                " + 2) × " + std::to_string(in.batch.bytes) + " B (" + in.batch.source + ") + 1Mi) + " +
                std::to_string(in.headroomPercent) + "% headroom";
    }
    if (in.nccl.transport != NcclTransport::kNone) {
      inputs += ", + NCCL reserve " + counted(in.ranks, "rank") + " × " +
                counted(in.nccl.communicators, "communicator") +
                " (" + in.nccl.communicatorsFrom + ") × " + std::to_string(in.nccl.perCommunicatorBytes) +
                " B";
    }
    return makeError("the /dev/shm size overflows 64 bits: " + inputs +
                     "; no node has that memory: lower the number that is wrong");
  };
  // With no workers the DataLoader makes its batches in the training process: nothing
  // of them is in /dev/shm.
  uint64_t perRank = 0;
  if (in.workers > 0) {
    auto batches = checkedMul(in.workers, in.prefetchFactor);
    if (!batches || !(batches = checkedAdd(*batches, kHeldBatches))) return overflow();
    auto bytes = checkedMul(*batches, in.batch.bytes);
    if (!bytes || !(bytes = checkedAdd(*bytes, kDataLoaderExtraBytes))) return overflow();
    perRank = *bytes;
  }
  auto payload = checkedMul(in.ranks, perRank);
  if (!payload) return overflow();
  auto scaled = checkedMul(*payload, 100 + in.headroomPercent);
  if (!scaled) return overflow();
  uint64_t withHeadroom = *scaled / 100 + (*scaled % 100 != 0 ? 1 : 0);
  // Bytes first: a transport that keeps nothing is 0 at any count.
  auto reserve = checkedMul(in.nccl.communicators, in.nccl.perCommunicatorBytes);
  if (reserve) reserve = checkedMul(*reserve, in.ranks);
  if (!reserve) return overflow();
  auto totalMiB = checkedAdd(ceilMiB(withHeadroom), ceilMiB(*reserve));
  if (!totalMiB) return overflow();
  auto shm = checkedMul(std::max(*totalMiB, kMinShmBytes / kMiB), kMiB);
  if (!shm || *shm > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return overflow();
  }

  ShmPlan plan;
  plan.perRankBytes = perRank;
  plan.payloadBytes = *payload;
  plan.withHeadroomBytes = withHeadroom;
  plan.ncclReserveBytes = *reserve;
  plan.ncclTransport = in.nccl.transport;
  plan.shmBytes = *shm;

  std::string f;
  f.reserve(512);  // a formula is 300-450 bytes
  appendAll(f, in.ranks, in.ranks == 1 ? " rank × " : " ranks × ");
  if (in.workers == 0) {
    f += "0 workers (the DataLoader makes its batches in the training process, none in /dev/shm) = 0 B";
  } else {
    appendAll(f, "((", in.workers, in.workers == 1 ? " worker × prefetch " : " workers × prefetch ", in.prefetchFactor,
              " + 2 held: the batch being handed over and the one in the training step) × ", in.batch.bytes, " B (",
              in.batch.source, ") + ", bytesText(kDataLoaderExtraBytes), " for the DataLoader's semaphores) = ",
              plan.payloadBytes, " B; +", in.headroomPercent, "% headroom = ", plan.withHeadroomBytes, " B");
  }
  appendAll(f, " → ", ceilMiB(withHeadroom), "Mi");
  if (in.nccl.transport == NcclTransport::kNone) {
    f += "; no NCCL reserve";
  } else {
    appendAll(f, "; + NCCL reserve ", counted(in.ranks, "rank"), " × ", counted(in.nccl.communicators, "communicator"),
              " (", in.nccl.communicatorsFrom, ") × ",
              in.nccl.perCommunicatorBytes == 0 ? std::string("0 B") : bytesText(in.nccl.perCommunicatorBytes),
              " per rank per communicator = ", ceilMiB(*reserve), "Mi");
  }
  if (!in.nccl.why.empty()) appendAll(f, " (", in.nccl.why, ")");
  appendAll(f, "; /dev/shm = ", bytesText(plan.shmBytes));
  if (*totalMiB * kMiB < kMinShmBytes) {
    appendAll(f, " (at least ", bytesText(kMinShmBytes), ", the container runtime's default)");
  }
  plan.formula = std::move(f);
  return plan;
}

}  // namespace podshaper
