#include "cli/logging.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <sstream>

namespace podshaper::cli {
namespace {

struct Args {
  std::vector<std::string> words;
  std::vector<char*> argv;
  int argc = 0;
  explicit Args(std::vector<std::string> w) : words(std::move(w)) {
    for (auto& x : words) argv.push_back(x.data());
    argv.push_back(nullptr);
    argc = static_cast<int>(words.size());
  }
  std::vector<std::string> left() const { return {argv.begin(), argv.begin() + argc}; }
};

TEST(LogFlags, TakenOutWhereverTheyAre) {
  Args a({"podshaper-operator", "run", "--log-level=debug", "--in-cluster", "--log-format", "json", "--config", "c"});
  auto options = takeLogFlags(a.argc, a.argv.data());
  ASSERT_TRUE(options.ok()) << options.error().message;
  EXPECT_EQ(options->level, "debug");
  EXPECT_EQ(options->format, "json");
  EXPECT_EQ(a.left(), (std::vector<std::string>{"podshaper-operator", "run", "--in-cluster", "--config", "c"}));
  EXPECT_EQ(a.argv[a.argc], nullptr);

  Args none({"podshaper-agent", "probe", "--log-levels=x"});  // another flag that starts alike is left
  auto defaults = takeLogFlags(none.argc, none.argv.data());
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->level, "info");
  EXPECT_EQ(defaults->format, "text");
  EXPECT_EQ(none.argc, 3);
}

TEST(LogFlags, BadValuesAreNamed) {
  Args level({"x", "--log-level", "loud"});
  EXPECT_EQ(takeLogFlags(level.argc, level.argv.data()).error().message,
            "--log-level \"loud\": use trace, debug, info, warn or error");
  Args format({"x", "--log-format=xml"});
  EXPECT_EQ(takeLogFlags(format.argc, format.argv.data()).error().message, "--log-format \"xml\": use text or json");
  Args missing({"x", "--log-level"});
  EXPECT_EQ(takeLogFlags(missing.argc, missing.argv.data()).error().message, "--log-level needs a value");
}

std::vector<nlohmann::json> jsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(Logging, JsonLinesWithTheObjectAndOwner) {
  setUpLogging("podshaper-test", {.level = "debug", .format = "json"});
  ::testing::internal::CaptureStderr();
  spdlog::debug("a \"quoted\" word,\na new line and a \x01 control");
  {
    LogObject about("ml/train-0", "Job train");
    spdlog::info("admission: denied");
    {
      LogObject inner("node/gpu-a");
      spdlog::warn("inner");
    }
    spdlog::error("outer again");
  }
  spdlog::trace("not at debug");
  const auto lines = jsonLines(::testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["msg"], "a \"quoted\" word,\na new line and a \x01 control");
  EXPECT_EQ(lines[0]["level"], "debug");
  EXPECT_EQ(lines[0]["logger"], "podshaper-test");
  EXPECT_FALSE(lines[0].contains("object"));
  const std::string time = lines[0]["time"];
  EXPECT_EQ(time.size(), 24u) << time;  // 2026-11-26T12:00:00.123Z
  EXPECT_EQ(time[10], 'T');
  EXPECT_EQ(time.back(), 'Z');
  EXPECT_EQ(lines[1]["object"], "ml/train-0");
  EXPECT_EQ(lines[1]["owner"], "Job train");
  EXPECT_EQ(lines[2]["object"], "node/gpu-a");
  EXPECT_FALSE(lines[2].contains("owner"));
  EXPECT_EQ(lines[3]["object"], "ml/train-0");
  EXPECT_EQ(lines[3]["level"], "error");
}

TEST(Logging, TextAtTheLevelAsked) {
  setUpLogging("podshaper-test", {.level = "warn", .format = "text"});
  ::testing::internal::CaptureStderr();
  spdlog::info("hidden");
  spdlog::warn("shown");
  const std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(text.find("hidden"), std::string::npos);
  EXPECT_NE(text.find("] [warning] shown\n"), std::string::npos) << text;
}

// A value no log pipeline can take apart wrongly: quotes, a backslash, a new line and a
// control character.
constexpr const char* kAwkward = "a \"quoted\" C:\\dir,\nnext line \x01 (end)";

TEST(Logging, NamedLoggerJsonHasItsNameAndEachField) {
  const Logger& lease = logger("lease");  // made before setUpLogging: it follows the binary's
  setUpLogging("podshaper-test", {.level = "info", .format = "json"});
  ::testing::internal::CaptureStderr();
  lease.info({{"lease", "ns/podshaper"}, {"from", kAwkward}, {"seconds", 15}}, "took over from {}", "op-a");
  {
    LogObject about("ml/train-0", "Job train");
    logger("admission").warn({{"uid", "u-1"}}, "denied");
  }
  logger("https").info("stopped");
  lease.debug({{"lease", "x"}}, "not at info");
  spdlog::info("the binary's own");
  const auto lines = jsonLines(::testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["logger"], "podshaper-test.lease");
  EXPECT_EQ(lines[0]["msg"], "took over from op-a");
  EXPECT_EQ(lines[0]["lease"], "ns/podshaper");
  EXPECT_EQ(lines[0]["from"], kAwkward);
  EXPECT_EQ(lines[0]["seconds"], "15");
  EXPECT_EQ(lines[0]["level"], "info");
  EXPECT_EQ(lines[1]["logger"], "podshaper-test.admission");
  EXPECT_EQ(lines[1]["uid"], "u-1");
  EXPECT_EQ(lines[1]["object"], "ml/train-0");
  EXPECT_EQ(lines[1]["owner"], "Job train");
  EXPECT_EQ(lines[1]["level"], "warning");
  EXPECT_EQ(lines[2]["logger"], "podshaper-test.https");
  EXPECT_EQ(lines[2].size(), 4u) << lines[2];  // time, level, logger, msg
  EXPECT_EQ(lines[3]["logger"], "podshaper-test");
  EXPECT_EQ(&logger("lease"), &lease);
}

TEST(Logging, NamedLoggerTextNamesItsSubjectAndListsTheRest) {
  setUpLogging("podshaper-test", {.level = "info", .format = "text"});
  ::testing::internal::CaptureStderr();
  logger("lease").info({{"lease", "ns/podshaper"}, {"identity", "op-b"}}, "took over from {}", "op-a");
  logger("https").warn({{"peer", kAwkward}, {"empty", ""}}, "refused");
  logger("https").info("stopped");
  {
    LogObject about("ml/train-0");
    spdlog::info("the binary's own");
  }
  const std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(text.find("] [info] lease ns/podshaper: took over from op-a (identity=op-b)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("] [warning] https: refused (peer=\"a \\\"quoted\\\" C:\\\\dir,\\nnext line \\u0001 (end)\", "
                      "empty=\"\")\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("] [info] https: stopped\n"), std::string::npos) << text;
  EXPECT_NE(text.find("] [info] the binary's own\n"), std::string::npos) << text;  // LogObject: JSON only
}

}  // namespace
}  // namespace podshaper::cli
