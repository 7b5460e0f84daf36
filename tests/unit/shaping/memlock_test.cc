#include "shaping/memlock_pod.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

using nlohmann::json;

TEST(MemlockLimit, UnlimitedOrAQuantityOfBytes) {
  auto unlimited = parseMemlockLimit("unlimited");
  ASSERT_TRUE(unlimited) << unlimited.error().message;
  EXPECT_FALSE(unlimited->bytes);
  EXPECT_EQ(unlimited->text(), "unlimited");
  EXPECT_EQ(unlimited->rlimit(), "18446744073709551615");
  EXPECT_EQ(unlimited->words(), "unlimited");

  auto four = parseMemlockLimit("4Mi");
  ASSERT_TRUE(four) << four.error().message;
  EXPECT_EQ(four->bytes, 4194304u);
  EXPECT_EQ(four->text(), "4194304");
  EXPECT_EQ(four->rlimit(), "4194304");
  EXPECT_EQ(four->words(), "4Mi");
  EXPECT_EQ(parseMemlockLimit("64Gi")->bytes, 64ULL << 30);
  // The label's and the report's own form reads back as itself.
  EXPECT_EQ(*parseMemlockLimit(four->text()), *four);
}

TEST(MemlockLimit, BadValuesSayWhatIsExpected) {
  for (const char* bad : {"", "Unlimited", "infinity", "-1", "4MB", "-4Mi"}) {
    auto limit = parseMemlockLimit(bad);
    ASSERT_FALSE(limit) << bad;
    EXPECT_NE(limit.error().message.find("neither unlimited nor a quantity of bytes"), std::string::npos)
        << limit.error().message;
  }
  auto zero = parseMemlockLimit("0");
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().message.find("is zero"), std::string::npos) << zero.error().message;
}

TEST(MemlockAnnotation, CarriesTheLimitAsked) {
  auto out = memlockAnnotation(json::object(), "trainer", MemlockLimit{4194304});
  ASSERT_TRUE(out.set);
  EXPECT_EQ(out.set->first, "ulimits.noderesource.dev/container.trainer");
  EXPECT_EQ(out.set->second, "- type: RLIMIT_MEMLOCK\n  soft: 4194304\n  hard: 4194304\n");
  // A user's flow list, written out again with the entry.
  auto flow = memlockAnnotation(json{{"ulimits.noderesource.dev/container.trainer", "[{type: nofile, soft: 1, hard: 1}]"}},
                                "trainer", MemlockLimit{4194304});
  ASSERT_TRUE(flow.set);
  EXPECT_EQ(flow.set->second,
            "- {type: nofile, soft: 1, hard: 1}\n- type: RLIMIT_MEMLOCK\n  soft: 4194304\n  hard: 4194304\n");
}

}  // namespace
}  // namespace podshaper
