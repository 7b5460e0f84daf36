#pragma once

#include <string>

#include "base/result.h"

// How the three binaries log: to stderr, as text for a person or as JSON lines for a log
// pipeline, at the level asked.
namespace podshaper::cli {

struct LogOptions {
  std::string level = "info";   // trace, debug, info, warn, error
  std::string format = "text";  // text, json
};

// Takes --log-level and --log-format (either `--name value` or `--name=value`) out of
// argv, wherever they are, and leaves the rest for the command's own flags. An error names
// the flag and the values it takes.
Result<LogOptions> takeLogFlags(int& argc, char** argv);

// The default logger, named `name`, on stderr. text:
//   [2026-11-26 12:00:00.123] [info] admission: denied ml/train-0 (Job train): …
// json, one object a line, the time in UTC (RFC 3339):
//   {"time":"2026-11-26T12:00:00.123Z","level":"info","logger":"podshaper-webhook",
//    "msg":"admission: denied …","object":"ml/train-0","owner":"Job train"}
void setUpLogging(const std::string& name, const LogOptions& options);

// While alive, this thread's log lines are about `object` ("ml/train-0", "node gpu-a")
// and its owner ("Job train", may be empty): the JSON lines' "object" and "owner" fields
// (text lines name their object in the message already).
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
