#include "base/base64.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Against RFC 4648 written out bit by bit, for every length up to past three of the 24-byte
// steps the encoder takes where the CPU has AVX2 (and many of its six-byte steps), so that
// each tail either leaves is met.
TEST(Base64, EncodesAsTheRfcWritesItAtEveryLength) {
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto slow = [&](const std::string& data) {
    std::string out;
    for (std::size_t i = 0; i < data.size(); i += 3) {
      unsigned n = 0;
      for (std::size_t k = 0; k < 3; ++k) {
        n = n << 8 | (i + k < data.size() ? static_cast<unsigned char>(data[i + k]) : 0);
      }
      const std::size_t chars = std::min<std::size_t>(4, (data.size() - i) * 4 / 3 + ((data.size() - i) % 3 != 0));
      for (std::size_t k = 0; k < 4; ++k) out += k < chars ? alphabet[(n >> (18 - 6 * k)) & 63] : '=';
    }
    return out;
  };
  std::string data;
  for (int length = 0; length <= 100; ++length) {
    EXPECT_EQ(base64Encode(data), slow(data)) << length;
    data += static_cast<char>(length * 37 + 200);
  }
  // Around the ends of the blocks it is written in (3 KiB of input each).
  for (int length = 101; length <= 6200; ++length) {
    data += static_cast<char>(length * 37 + 200);
    if ((length > 3060 && length < 3090) || length > 6130) {
      EXPECT_EQ(base64Encode(data), slow(data)) << data.size();
    }
  }
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
