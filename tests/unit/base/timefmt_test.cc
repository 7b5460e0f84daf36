#include "base/timefmt.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

constexpr long long kAt = 1795305600;  // 2026-11-22T00:00:00Z

TEST(TimeFormat, RoundTrips) {
  EXPECT_EQ(formatTime(kAt), "2026-11-22T00:00:00Z");
  EXPECT_EQ(parseTime("2026-11-22T00:00:00Z"), kAt);
  EXPECT_EQ(formatMicroTime(kAt * 1000000 + 123456), "2026-11-22T00:00:00.123456Z");
  EXPECT_EQ(parseTimeMicros("2026-11-22T00:00:00.123456Z"), kAt * 1000000 + 123456);
  EXPECT_EQ(parseTime("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parseTime("2024-02-29T12:00:00Z"), 1709208000);
}

TEST(TimeFormat, OffsetsAndFractions) {
  EXPECT_EQ(parseTime("2026-11-22T01:00:00+01:00"), kAt);
  EXPECT_EQ(parseTime("2026-11-21T23:30:00-00:30"), kAt);
  EXPECT_EQ(parseTimeMicros("2026-11-22T00:00:00.5Z"), kAt * 1000000 + 500000);
}

TEST(TimeFormat, RefusesWhatDoesNotParse) {
  for (const char* bad : {"", "yesterday", "2026-11-22", "2026-11-22T00:00:00", "2026-13-01T00:00:00Z",
                          "2026-11-22T24:00:00Z", "2026-11-22T00:00:00.Z", "2026-11-22T00:00:00Zjunk",
                          "2026-11-22T00:00:00+0100"}) {
    EXPECT_FALSE(parseTimeMicros(bad)) << bad;
  }
}

TEST(Duration, GoDurations) {
  EXPECT_EQ(parseDurationSeconds("10m"), 600);
  EXPECT_EQ(parseDurationSeconds("1h30m"), 5400);
  EXPECT_EQ(parseDurationSeconds("90s"), 90);
  EXPECT_EQ(parseDurationSeconds("500ms"), 1);  // rounded up
  EXPECT_EQ(parseDurationSeconds("0s"), 0);
  for (const char* bad : {"", "10", "m", "-1m", "1d", "1.5h", "10 m", "99999999999999999999h"}) {
    EXPECT_FALSE(parseDurationSeconds(bad)) << bad;
  }
}

}  // namespace
}  // namespace podshaper
