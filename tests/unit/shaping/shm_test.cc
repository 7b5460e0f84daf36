#include "shaping/shm.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

constexpr uint64_t kMi = 1024 * 1024;

// One communicator per rank of `bytes` over NET; none() is no NCCL.
NcclReserve net(uint64_t bytes, uint64_t communicators = 1) {
  return {communicators, "config defaults.ncclCommunicators", bytes, NcclTransport::kNet, "because"};
}
NcclReserve none() { return {}; }

TEST(Shm, SeedExampleIs6008MiWithoutReserve) {
  // 8 ranks, 8 workers, prefetch 4, batch 32×3×224×224 float32, headroom 20, no reserve.
  auto batch = shapeBytes("32x3x224x224", "float32");
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(*batch, 19267584u);
  ShmInputs in{8, 8, 4, {*batch, "32x3x224x224 float32"}, 20, none()};
  auto plan = planShm(in);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->perRankBytes, (8 * 4 + 2) * 19267584u + kMi);  // 656146432
  EXPECT_EQ(plan->withHeadroomBytes, 6299005748u);
  EXPECT_EQ(plan->shmBytes, 6008 * kMi);
  EXPECT_NE(plan->formula.find("/dev/shm = 6008Mi"), std::string::npos) << plan->formula;
  EXPECT_NE(plan->formula.find("; no NCCL reserve;"), std::string::npos) << plan->formula;
}

TEST(Shm, TheFormulaSaysWhichReserveAndWhy) {
  ShmInputs in{2, 2, 2, {32 * kMi, "batch-bytes 32Mi"}, 0, net(32 * kMi, 2)};
  auto plan = planShm(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->formula,
            "2 ranks × ((2 workers × prefetch 2 + 2 held: the batch being handed over and the one in the training "
            "step) × 33554432 B (batch-bytes 32Mi) + 1Mi for the DataLoader's semaphores) = 404750336 B; +0% "
            "headroom = 404750336 B → 386Mi; + NCCL reserve 2 ranks × 2 communicators (config "
            "defaults.ncclCommunicators) × 32Mi per rank per communicator = 128Mi (because); /dev/shm = 514Mi");
}

TEST(Shm, NoWorkersPutNoBatchesInShmAndTheFloorIsTheRuntimesDefault) {
  auto plan = planShm({4, 0, 2, {32 * kMi, "batch-bytes 32Mi"}, 20, none()});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->payloadBytes, 0u);
  EXPECT_EQ(plan->shmBytes, 64 * kMi);
  EXPECT_NE(plan->formula.find("0 workers (the DataLoader makes its batches in the training process"),
            std::string::npos) << plan->formula;
  EXPECT_NE(plan->formula.find("/dev/shm = 64Mi (at least 64Mi, the container runtime's default)"),
            std::string::npos) << plan->formula;
}

struct ShmCase {
  const char* description;
  ShmInputs in;
  uint64_t shmMiB;  // 0: overflow error expected
};

class ShmTable : public testing::TestWithParam<ShmCase> {};

TEST_P(ShmTable, Computes) {
  const auto& c = GetParam();
  auto plan = planShm(c.in);
  if (c.shmMiB == 0) {
    ASSERT_FALSE(plan.ok()) << c.description;
    EXPECT_NE(plan.error().message.find("overflows"), std::string::npos) << plan.error().message;
    return;
  }
  ASSERT_TRUE(plan.ok()) << c.description << ": " << plan.error().message;
  EXPECT_EQ(plan->shmBytes, c.shmMiB * kMi) << c.description << ": " << plan->formula;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ShmTable,
    testing::Values(
        // ((4×2+2)×1Mi + 1Mi)×1 = 11Mi, +20% = 13.2Mi → 14Mi, + 64Mi reserve
        ShmCase{"one rank with NCCL reserve", {1, 4, 2, {kMi, "1Mi"}, 20, net(64 * kMi)}, 14 + 64},
        ShmCase{"no workers and no reserve is the floor", {2, 0, 2, {kMi, "1Mi"}, 0, none()}, 64},
        ShmCase{"no workers is the reserve alone", {2, 0, 2, {kMi, "1Mi"}, 0, net(100 * kMi)}, 200},
        ShmCase{"small batches are lifted to the floor", {1, 1, 1, {kMi, "1Mi"}, 0, none()}, 64},
        ShmCase{"zero headroom exact", {1, 1, 1, {32 * kMi, "32Mi"}, 0, none()}, 97},
        ShmCase{"one byte over rounds up", {1, 1, 1, {32 * kMi + 1, "x"}, 0, none()}, 98},
        ShmCase{"reserve not a MiB multiple rounds up", {3, 1, 1, {32 * kMi, "32Mi"}, 0, net(1000)}, 291 + 1},
        ShmCase{"8 ranks reserve", {8, 8, 4, {19267584, "seed"}, 20, net(64 * kMi)}, 6008 + 512},
        ShmCase{"overflow in workers × prefetch", {1, UINT64_MAX, 2, {1, "x"}, 20, none()}, 0},
        ShmCase{"overflow in the held batches", {1, UINT64_MAX, 1, {1, "x"}, 20, none()}, 0},
        ShmCase{"overflow in batch product", {8, 8, 4, {UINT64_MAX / 2, "x"}, 20, none()}, 0},
        ShmCase{"overflow in headroom", {1, 1, 1, {UINT64_MAX / 50, "x"}, 20, none()}, 0},
        ShmCase{"overflow beyond int64 total", {1, 0, 1, {1, "x"}, 0, net(1ULL << 63)}, 0},
        ShmCase{"overflow in reserve", {UINT64_MAX, 0, 1, {1, "x"}, 0, net(2)}, 0},
        ShmCase{"overflow in ranks × communicators", {1ULL << 40, 0, 1, {1, "x"}, 0, net(1, 1ULL << 40)}, 0},
        ShmCase{"overflow in communicators × bytes", {1, 0, 1, {1, "x"}, 0, net(1ULL << 40, 1ULL << 40)}, 0},
        // 2 NET ranks × 6 communicators × 33412Ki = 391.5Mi → 392Mi beside the DataLoader's 149Mi.
        ShmCase{"the note's job over NET, 6 communicators",
                {2, 3, 2, {9633792, "16x3x224x224 float32"}, 0, net(34213888, 6)}, 149 + 392}),
    [](const auto& info) {
      std::string name = info.param.description;
      for (char& ch : name) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(ShapeBytes, DtypesAndErrors) {
  EXPECT_EQ(*shapeBytes("2x3", "float64"), 48u);
  EXPECT_EQ(*shapeBytes("2x3", "bfloat16"), 12u);
  EXPECT_EQ(*shapeBytes("10", "torch.uint8"), 10u);
  EXPECT_EQ(*shapeBytes("10", "bool"), 10u);
  EXPECT_EQ(*shapeBytes("2x3", "complex64"), 48u);
  EXPECT_EQ(*shapeBytes("2x3", "torch.float8_e4m3fn"), 6u);
  EXPECT_NE(shapeBytes("2x3", "float8").error().message.find("unknown dtype \"float8\""), std::string::npos);
  EXPECT_NE(shapeBytes("2x0", "int8").error().message.find("zero dimension"), std::string::npos);
  EXPECT_FALSE(shapeBytes("2xx3", "int8").ok());
  EXPECT_FALSE(shapeBytes("", "int8").ok());
  EXPECT_FALSE(shapeBytes("2x3x", "int8").ok());
  EXPECT_FALSE(shapeBytes("2*3", "int8").ok());
  EXPECT_FALSE(shapeBytes("-2x3", "int8").ok());
  EXPECT_NE(shapeBytes("4294967296x4294967296", "int8").error().message.find("overflows"), std::string::npos);
}

// torch.<name>.itemsize in torch 2.x, names and aliases alike.
TEST(DtypeBytes, EveryWholeByteDtypeOfPyTorch) {
  const std::pair<const char*, uint64_t> sizes[] = {
      {"float64", 8}, {"double", 8}, {"float32", 4}, {"float", 4}, {"float16", 2}, {"half", 2},
      {"bfloat16", 2}, {"float8_e4m3fn", 1}, {"float8_e4m3fnuz", 1}, {"float8_e5m2", 1},
      {"float8_e5m2fnuz", 1}, {"float8_e8m0fnu", 1}, {"float4_e2m1fn_x2", 1}, {"complex128", 16},
      {"cdouble", 16}, {"complex64", 8}, {"cfloat", 8}, {"complex32", 4}, {"chalf", 4}, {"int64", 8},
      {"long", 8}, {"int32", 4}, {"int", 4}, {"int16", 2}, {"short", 2}, {"int8", 1}, {"uint64", 8},
      {"uint32", 4}, {"uint16", 2}, {"uint8", 1}, {"bool", 1}};
  for (const auto& [name, bytes] : sizes) {
    auto got = dtypeBytes(name);
    ASSERT_TRUE(got.ok()) << name;
    EXPECT_EQ(*got, bytes) << name;
    EXPECT_EQ(*dtypeBytes(std::string("torch.") + name), bytes) << name;
  }
}

TEST(DtypeBytes, UnknownNamesAreDeniedListingTheKnownOnes) {
  for (const char* bad : {"fp8", "float8", "Float32", "qint8", "bits8", "float32 ", "torch.", ""}) {
    auto got = dtypeBytes(bad);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.error().message,
              "unknown dtype \"" + std::string(bad) +
                  "\" (use one of float64, float32, float16, bfloat16, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, "
                  "float8_e5m2fnuz, float8_e8m0fnu, float4_e2m1fn_x2, complex128, complex64, complex32, int64, int32, "
                  "int16, int8, uint64, uint32, uint16, uint8, bool, or give podshaper.io/batch-bytes)");
  }
}

}  // namespace
}  // namespace podshaper
