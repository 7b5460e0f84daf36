#include "cli/flags.h"

#include <gtest/gtest.h>

namespace podshaper::cli {
namespace {

Result<Flags> parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return Flags::parse(static_cast<int>(argv.size()), argv.data(), 0, {"filename", "namespace", "output"}, {"quiet"},
                      {{"f", "filename"}, {"n", "namespace"}});
}

TEST(Flags, LongAndShortForms) {
  auto flags = parse({"-f", "-", "--output=json", "-nml", "--quiet"});
  ASSERT_TRUE(flags.ok()) << flags.error().message;
  EXPECT_EQ(flags->get("filename", ""), "-");
  EXPECT_EQ(flags->get("namespace", ""), "ml");
  EXPECT_EQ(flags->get("output", ""), "json");
  EXPECT_TRUE(flags->has("quiet"));
  EXPECT_EQ(parse({"-f=job.yaml"})->get("filename", ""), "job.yaml");
}

TEST(Flags, MistakesAreNamed) {
  EXPECT_EQ(parse({"-x", "1"}).error().message, "unknown flag -x");
  EXPECT_EQ(parse({"--bogus"}).error().message, "unknown flag --bogus");
  EXPECT_EQ(parse({"-f"}).error().message, "--filename needs a value");
  EXPECT_EQ(parse({"--quiet=yes"}).error().message, "--quiet takes no value");
  EXPECT_EQ(parse({"job.yaml"}).error().message, "unexpected argument \"job.yaml\"");
}

}  // namespace
}  // namespace podshaper::cli
