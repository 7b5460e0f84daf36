#include "core/shm.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

constexpr uint64_t kMi = 1024 * 1024;

TEST(Shm, SeedExampleFromDesignIs5822Mi) {
  // 8 ranks, 8 workers, prefetch 4, batch 32×3×224×224 float32, headroom 20, no reserve.
  auto batch = shapeBytes("32x3x224x224", "float32");
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(*batch, 19267584u);
  ShmInputs in{8, 8, 4, {*batch, "32x3x224x224 float32"}, 20, 0};
  auto plan = planShm(in);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->perRankBytes, 635830272u);
  EXPECT_EQ(plan->withHeadroomBytes, 6103970612u);
  EXPECT_EQ(plan->shmBytes, 5822 * kMi);
  EXPECT_NE(plan->formula.find("/dev/shm = 5822Mi"), std::string::npos) << plan->formula;
  EXPECT_NE(plan->formula.find("no NCCL shm reserve"), std::string::npos) << plan->formula;
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
        // (4×2+1)×1Mi×1 = 9Mi, +20% = 10.8Mi → 11Mi, + 64Mi reserve
        ShmCase{"one rank with NCCL reserve", {1, 4, 2, {kMi, "1Mi"}, 20, 64 * kMi}, 11 + 64},
        ShmCase{"no workers still holds the consumed batch", {2, 0, 2, {kMi, "1Mi"}, 0, 0}, 2},
        ShmCase{"zero headroom exact", {1, 1, 1, {kMi, "1Mi"}, 0, 0}, 2},
        ShmCase{"one byte over rounds up", {1, 0, 1, {kMi + 1, "x"}, 0, 0}, 2},
        ShmCase{"reserve not a MiB multiple rounds up", {3, 0, 1, {kMi, "1Mi"}, 0, 1000}, 3 + 1},
        ShmCase{"8 ranks reserve", {8, 8, 4, {19267584, "seed"}, 20, 64 * kMi}, 5822 + 512},
        ShmCase{"overflow in per-rank", {1, UINT64_MAX, 2, {1, "x"}, 20, 0}, 0},
        ShmCase{"overflow in batch product", {8, 8, 4, {UINT64_MAX / 2, "x"}, 20, 0}, 0},
        ShmCase{"overflow in headroom", {1, 0, 1, {UINT64_MAX / 50, "x"}, 20, 0}, 0},
        ShmCase{"overflow beyond int64 total", {1, 0, 1, {(1ULL << 63), "x"}, 0, 0}, 0},
        ShmCase{"overflow in reserve", {UINT64_MAX, 0, 1, {1, "x"}, 0, 2}, 0}),
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
  for (const char* d : {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}) {
    EXPECT_TRUE(dtypeBytes(d).ok()) << d;
  }
  EXPECT_NE(shapeBytes("2x3", "float8").error().message.find("unknown dtype \"float8\""), std::string::npos);
  EXPECT_NE(shapeBytes("2x0", "int8").error().message.find("zero dimension"), std::string::npos);
  EXPECT_FALSE(shapeBytes("2xx3", "int8").ok());
  EXPECT_FALSE(shapeBytes("", "int8").ok());
  EXPECT_FALSE(shapeBytes("2x3x", "int8").ok());
  EXPECT_FALSE(shapeBytes("2*3", "int8").ok());
  EXPECT_FALSE(shapeBytes("-2x3", "int8").ok());
  EXPECT_NE(shapeBytes("4294967296x4294967296", "int8").error().message.find("overflows"), std::string::npos);
}

}  // namespace
}  // namespace podshaper
