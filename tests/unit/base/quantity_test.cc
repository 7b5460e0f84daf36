#include "base/quantity.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

struct QuantityCase {
  const char* description;
  const char* text;
  int64_t bytes;  // -1: an error is expected
  const char* errorContains = "";
};

class QuantityTest : public testing::TestWithParam<QuantityCase> {};

TEST_P(QuantityTest, Parses) {
  const auto& c = GetParam();
  auto r = parseQuantity(c.text);
  if (c.bytes < 0) {
    ASSERT_FALSE(r.ok()) << c.description << ": got " << (r.ok() ? *r : 0);
    EXPECT_NE(r.error().message.find(c.errorContains), std::string::npos) << r.error().message;
  } else {
    ASSERT_TRUE(r.ok()) << c.description << ": " << r.error().message;
    EXPECT_EQ(*r, c.bytes) << c.description;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, QuantityTest,
    testing::Values(
        QuantityCase{"plain integer", "19267584", 19267584},
        QuantityCase{"binary Mi", "18Mi", 18 * 1024 * 1024},
        QuantityCase{"binary Ki", "1Ki", 1024},
        QuantityCase{"binary Gi fraction", "1.5Gi", 1610612736},
        QuantityCase{"binary Ti", "2Ti", 2199023255552LL},
        QuantityCase{"binary Ei", "7Ei", 7LL << 60},
        QuantityCase{"decimal k", "64k", 64000},
        QuantityCase{"decimal M", "100M", 100000000},
        QuantityCase{"decimal G", "2G", 2000000000},
        QuantityCase{"decimal E", "1E", 1000000000000000000LL},
        QuantityCase{"exponent", "1e9", 1000000000},
        QuantityCase{"exponent upper", "5E3", 5000},
        QuantityCase{"exponent negative rounds up", "15e-1", 2},
        QuantityCase{"milli rounds up", "500m", 1},
        QuantityCase{"milli exact", "3000m", 3},
        QuantityCase{"nano tiny rounds up", "1n", 1},
        QuantityCase{"zero", "0", 0},
        QuantityCase{"zero Mi", "0Mi", 0},
        QuantityCase{"leading plus", "+4Ki", 4096},
        QuantityCase{"trailing dot", "5.", 5},
        QuantityCase{"leading dot", ".5Ki", 512},
        QuantityCase{"trailing fraction zeros", "1.000000000000000000000000000000000000000000Gi", 1073741824},
        QuantityCase{"int64 max", "9223372036854775807", INT64_MAX},
        QuantityCase{"unknown suffix", "12Qi", -1, "unknown suffix \"Qi\""},
        QuantityCase{"negative", "-1Mi", -1, "negative"},
        QuantityCase{"empty", "", -1, "no number"},
        QuantityCase{"only suffix", "Mi", -1, "no number"},
        QuantityCase{"spaces", " 1Mi", -1, "no number"},
        QuantityCase{"trailing space", "1Mi ", -1, "unknown suffix"},
        QuantityCase{"lower-case mi", "1mi", -1, "unknown suffix"},
        QuantityCase{"overflow", "9223372036854775808", -1, "too large"},
        QuantityCase{"overflow Ei", "8Ei", -1, "too large"},
        QuantityCase{"overflow exponent", "1e999", -1, "too large"},
        QuantityCase{"exponent too long", "1e1000", -1, "bad exponent"},
        QuantityCase{"too many digits", "1234567890123456789012345678901234567890", -1, "too many digits"},
        QuantityCase{"two dots", "1.2.3", -1, "unknown suffix"}),
    [](const auto& info) {
      std::string name = info.param.description;
      for (char& ch : name) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(FormatBytes, UsesLargestExactBinarySuffix) {
  EXPECT_EQ(formatBytes(0), "0");
  EXPECT_EQ(formatBytes(5822LL * 1024 * 1024), "5822Mi");
  EXPECT_EQ(formatBytes(100LL << 30), "100Gi");
  EXPECT_EQ(formatBytes(1536 * 1024), "1536Ki");
  EXPECT_EQ(formatBytes(1000), "1000");
  EXPECT_EQ(formatBytes(1LL << 60), "1Ei");
}

TEST(FormatBytes, RoundTripsThroughParse) {
  for (int64_t v : {int64_t{1}, int64_t{1023}, int64_t{1} << 20, (int64_t{3} << 40) + 4096, INT64_MAX}) {
    auto parsed = parseQuantity(formatBytes(v));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, v);
  }
}

TEST(ParseCount, AcceptsOnlyPlainNonNegativeIntegers) {
  EXPECT_EQ(*parseCount("0"), 0u);
  EXPECT_EQ(*parseCount("18446744073709551615"), UINT64_MAX);
  EXPECT_NE(parseCount("18446744073709551616").error().message.find("too large"), std::string::npos);
  EXPECT_NE(parseCount("-1").error().message.find("negative"), std::string::npos);
  EXPECT_FALSE(parseCount("").ok());
  EXPECT_FALSE(parseCount("4 ").ok());
  EXPECT_FALSE(parseCount("+4").ok());
  EXPECT_FALSE(parseCount("4.0").ok());
  EXPECT_FALSE(parseCount("eight").ok());
}

}  // namespace
}  // namespace podshaper
