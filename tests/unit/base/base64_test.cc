#include "base/base64.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace podshaper {
namespace {

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(base64Encode(""), "");
  EXPECT_EQ(base64Encode("f"), "Zg==");
  EXPECT_EQ(base64Encode("fo"), "Zm8=");
  EXPECT_EQ(base64Encode("foo"), "Zm9v");
  EXPECT_EQ(base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64Encode("foobar"), "Zm9vYmFy");
  for (const std::string& s : std::vector<std::string>{"", "f", "fo", "foo", "foob", "fooba", "foobar", std::string("\0\xff\x10", 3)}) {
    EXPECT_EQ(*base64Decode(base64Encode(s)), s);
  }
  EXPECT_FALSE(base64Decode("Z===").ok());
  EXPECT_FALSE(base64Decode("Zm*v").ok());
}

// Every 12-bit group, in every position of a 3-byte group and of the padded tail.
TEST(Base64, EveryByteInEveryPlaceRoundTrips) {
  std::string all;
  for (int i = 0; i < 3 * 4096 + 2; ++i) all += static_cast<char>((i * 7 + i / 256) & 0xff);
  for (std::size_t cut : {all.size(), all.size() - 1, all.size() - 2}) {
    const std::string part = all.substr(0, cut);
    auto back = base64Decode(base64Encode(part));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, part);
  }
}

TEST(DecodeBase64, Table) {
  struct Case {
    std::string in;
    std::string out;
    bool ok;
  };
  const Case cases[] = {
      {"", "", true},          {"Zg==", "f", true},      {"Zm8=", "fo", true},   {"Zm9v", "foo", true},
      {"Zm9vYg", "foob", true}, {"Zm9v\nYmFy", "foobar", true}, {"Z", "", false}, {"Zm9v!", "", false},
      {"Zg==Zg==", "", false}, {"Zg===", "", false},
  };
  for (const auto& c : cases) {
    auto r = base64Decode(c.in);
    EXPECT_EQ(r.ok(), c.ok) << "input \"" << c.in << "\"";
    if (c.ok && r.ok()) {
      EXPECT_EQ(*r, c.out) << "input \"" << c.in << "\"";
    }
  }
}

}  // namespace
}  // namespace podshaper
