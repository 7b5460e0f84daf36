#pragma once

#include <concepts>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/common.h>
#include <spdlog/fwd.h>

#include "base/result.h"

// How the three binaries log: to stderr, as text for a person or as JSON lines for a log
// pipeline, at the level asked. Each part of a binary logs through a logger of its own
// name ("lease", "admission", "https"), and says what a line is about in key/value fields
// rather than in words a log pipeline would have to parse.
namespace podshaper::cli {

struct LogOptions {
  std::string level = "info";   // trace, debug, info, warn, error
  std::string format = "text";  // text, json
};

// Takes --log-level and --log-format (either `--name value` or `--name=value`) out of
// argv, wherever they are, and leaves the rest for the command's own flags. An error names
// the flag and the values it takes.
Result<LogOptions> takeLogFlags(int& argc, char** argv);

// The binary's loggers, `name` and `name.<logger>`, on stderr. A line of logger "lease"
// with the fields lease=podshaper-system/podshaper-operator and identity=op-b, as text
// (the field named as the logger is what the line is about: it follows the name):
//   [2026-11-26 12:00:00.123] [info] lease podshaper-system/podshaper-operator: took over from op-a (identity=op-b)
// as JSON, one object a line, the time in UTC (RFC 3339), each field a key:
//   {"time":"2026-11-26T12:00:00.123Z","level":"info","logger":"podshaper-operator.lease",
//    "msg":"took over from op-a","lease":"podshaper-system/podshaper-operator","identity":"op-b"}
// A line of the binary's own logger (spdlog's default) has no name in its text.
// Call it before any thread logs.
void setUpLogging(const std::string& name, const LogOptions& options);

// One key/value of a log line. Keys are words of the logger's own ("node", "path",
// "identity"), never time, level, logger, msg, object or owner.
struct LogField {
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(v) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  template <typename T>
    requires std::integral<T> || std::floating_point<T>
  LogField(std::string_view k, T v) : key(k), value(fmt::format("{}", v)) {}
  std::string_view key;
  std::string value;
};
// A line's fields: `{{"node", name}, {"gpus", 8}}`, or a vector a class builds once for
// all its lines. Only for the call it is passed to.
class LogFields {
 public:
  LogFields() = default;
  // The list lives until the end of the call it is written in, as long as this.
  LogFields(std::initializer_list<LogField> f) : begin_(std::data(f)), end_(std::data(f) + f.size()) {}
  LogFields(const std::vector<LogField>& f) : begin_(f.data()), end_(f.data() + f.size()) {}
  const LogField* begin() const { return begin_; }
  const LogField* end() const { return end_; }

 private:
  const LogField* begin_ = nullptr;
  const LogField* end_ = nullptr;
};

// A named logger: `logger("lease").info({{"lease", name}}, "took over from {}", holder)`.
// Its lines go where the binary's go, at the binary's level.
class Logger {
 public:
  template <typename... A>
  void trace(LogFields f, fmt::format_string<A...> s, A&&... a) const { log(spdlog::level::trace, f, s, fmt::make_format_args(a...)); }
  template <typename... A>
  void debug(LogFields f, fmt::format_string<A...> s, A&&... a) const { log(spdlog::level::debug, f, s, fmt::make_format_args(a...)); }
  template <typename... A>
  void info(LogFields f, fmt::format_string<A...> s, A&&... a) const { log(spdlog::level::info, f, s, fmt::make_format_args(a...)); }
  template <typename... A>
  void warn(LogFields f, fmt::format_string<A...> s, A&&... a) const { log(spdlog::level::warn, f, s, fmt::make_format_args(a...)); }
  template <typename... A>
  void error(LogFields f, fmt::format_string<A...> s, A&&... a) const { log(spdlog::level::err, f, s, fmt::make_format_args(a...)); }
  template <typename... A>
  void debug(fmt::format_string<A...> s, A&&... a) const { log(spdlog::level::debug, {}, s, fmt::make_format_args(a...)); }
  template <typename... A>
  void info(fmt::format_string<A...> s, A&&... a) const { log(spdlog::level::info, {}, s, fmt::make_format_args(a...)); }
  template <typename... A>
  void warn(fmt::format_string<A...> s, A&&... a) const { log(spdlog::level::warn, {}, s, fmt::make_format_args(a...)); }
  template <typename... A>
  void error(fmt::format_string<A...> s, A&&... a) const { log(spdlog::level::err, {}, s, fmt::make_format_args(a...)); }

  explicit Logger(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

 private:
  friend void setUpLogging(const std::string&, const LogOptions&);
  friend const Logger& logger(std::string_view);
  void log(spdlog::level::level_enum level, LogFields fields, fmt::string_view format, fmt::format_args args) const;

  std::string name_;
  std::shared_ptr<spdlog::logger> logger_;
};

// The logger named `name`, made once and kept for the life of the program.
const Logger& logger(std::string_view name);

// While alive, this thread's log lines are about `object` ("ml/train-0", "node gpu-a")
// and its owner ("Job train", may be empty): the JSON lines' "object" and "owner" fields
// (text lines name their object in the message or a field already).
class LogObject {
 public:
  explicit LogObject(std::string object, std::string owner = "");
  ~LogObject();
  LogObject(const LogObject&) = delete;
  LogObject& operator=(const LogObject&) = delete;

 private:
  std::string previousObject_, previousOwner_;
};

}  // namespace podshaper::cli
