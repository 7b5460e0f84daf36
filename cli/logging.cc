#include "cli/logging.h"

#include <cstring>
#include <utility>
#include <memory>
#include <vector>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace podshaper::cli {
namespace {

thread_local std::string tObject;
thread_local std::string tOwner;

void appendEscaped(std::string_view text, spdlog::memory_buf_t& dest) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': dest.append(std::string_view("\\\"")); break;
      case '\\': dest.append(std::string_view("\\\\")); break;
      case '\n': dest.append(std::string_view("\\n")); break;
      case '\t': dest.append(std::string_view("\\t")); break;
      case '\r': dest.append(std::string_view("\\r")); break;
      default:
        if (u < 0x20 || u == 0x7f) {
          const char escaped[] = {'\\', 'u', '0', '0', kHex[u >> 4], kHex[u & 15]};
          dest.append(escaped, escaped + sizeof(escaped));
        } else {
          dest.push_back(c);
        }
    }
  }
}

// %* : the message as a JSON string's contents.
class JsonMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    appendEscaped(std::string_view(msg.payload.data(), msg.payload.size()), dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessage>(); }
};

// %O : ,"object":"…","owner":"…" while a LogObject is alive on this thread.
class JsonObject final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    if (tObject.empty()) return;
    dest.append(std::string_view(",\"object\":\""));
    appendEscaped(tObject, dest);
    dest.push_back('"');
    if (tOwner.empty()) return;
    dest.append(std::string_view(",\"owner\":\""));
    appendEscaped(tOwner, dest);
    dest.push_back('"');
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonObject>(); }
};

bool takeValue(int& i, int argc, char** argv, const char* flag, std::string& value, bool& found) {
  const std::size_t n = std::strlen(flag);
  if (std::strncmp(argv[i], flag, n) != 0) return true;
  if (argv[i][n] == '=') {
    value = argv[i] + n + 1;
  } else if (argv[i][n] == '\0') {
    if (i + 1 >= argc) return false;
    value = argv[++i];
  } else {
    return true;  // another flag that starts alike
  }
  found = true;
  return true;
}

}  // namespace

Result<LogOptions> takeLogFlags(int& argc, char** argv) {
  LogOptions options;
  std::vector<char*> kept;
  for (int i = 0; i < argc; ++i) {
    bool found = false;
    for (auto [flag, value] : {std::pair<const char*, std::string*>{"--log-level", &options.level},
                               std::pair<const char*, std::string*>{"--log-format", &options.format}}) {
      if (found) break;
      if (!takeValue(i, argc, argv, flag, *value, found)) return makeError(std::string(flag) + " needs a value");
    }
    if (!found) kept.push_back(argv[i]);
  }
  if (options.level != "trace" && options.level != "debug" && options.level != "info" && options.level != "warn" &&
      options.level != "error") {
    return makeError("--log-level \"" + options.level + "\": use trace, debug, info, warn or error");
  }
  if (options.format != "text" && options.format != "json") {
    return makeError("--log-format \"" + options.format + "\": use text or json");
  }
  for (std::size_t i = 0; i < kept.size(); ++i) argv[i] = kept[i];
  argc = static_cast<int>(kept.size());
  argv[argc] = nullptr;
  return options;
}

void setUpLogging(const std::string& name, const LogOptions& options) {
  auto logger = std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (options.format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonMessage>('*').add_flag<JsonObject>('O').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","logger":"%n","msg":"%*"%O})");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  }
  logger->set_level(spdlog::level::from_str(options.level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
}

LogObject::LogObject(std::string object, std::string owner)
    : previousObject_(std::exchange(tObject, std::move(object))), previousOwner_(std::exchange(tOwner, std::move(owner))) {}

LogObject::~LogObject() {
  tObject = std::move(previousObject_);
  tOwner = std::move(previousOwner_);
}

}  // namespace podshaper::cli
