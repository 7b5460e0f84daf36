#include "base/string_pool.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace podshaper {
namespace {

TEST(StringPool, EqualStringsAreKeptOnce) {
  StringPool pool;
  const std::string key = "feature.node.kubernetes.io/cpu-cpuid.AVX512F";  // longer than inline
  SharedString a = pool.intern(key);
  SharedString b = pool.intern(std::string(key));
  SharedString c = pool.intern("true");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(*a, key);
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(pool.size(), 2u);
}

TEST(StringPool, StringsNobodyHoldsAreForgottenAsItGrows) {
  StringPool pool;
  SharedString kept = pool.intern("kept");
  // Unique values that come and go (a label holding a timestamp, renamed nodes): held
  // for a moment only.
  for (int i = 0; i < 100000; ++i) pool.intern("value-" + std::to_string(i));
  EXPECT_LT(pool.size(), 10000u);  // swept, not 100,001
  EXPECT_EQ(pool.intern("kept").get(), kept.get());  // what is held stays the one string
  EXPECT_EQ(*kept, "kept");
}

TEST(StringPool, AStringOutlivesThePool) {
  SharedString s;
  {
    StringPool pool;
    s = pool.intern("podshaper.io/topology-validated");
  }
  EXPECT_EQ(*s, "podshaper.io/topology-validated");
}

}  // namespace
}  // namespace podshaper
