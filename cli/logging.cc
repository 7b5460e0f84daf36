#include "cli/logging.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace podshaper::cli {
namespace {

thread_local std::string tObject;
thread_local std::string tOwner;
// The fields of the line being written: a line is formatted on the thread that logs it.
thread_local const LogFields* tFields = nullptr;

struct Loggers {
  std::mutex mu;
  std::string binary = "podshaper";
  std::map<std::string, std::unique_ptr<Logger>, std::less<>> byName;
};
Loggers& loggers() {
  static Loggers* all = new Loggers;  // never freed: a thread may log while the program exits
  return *all;
}

std::shared_ptr<spdlog::logger> makeLogger(const std::string& name) {
  const auto& root = spdlog::default_logger();
  auto made = std::make_shared<spdlog::logger>(loggers().binary + "." + name, root->sinks().begin(), root->sinks().end());
  made->set_level(root->level());
  made->flush_on(root->flush_level());
  return made;
}

// "lease" of "podshaper-operator.lease"; empty for the binary's own logger.
std::string_view shortName(const spdlog::details::log_msg& msg) {
  const std::string_view name(msg.logger_name.data(), msg.logger_name.size());
  const auto dot = name.find('.');
  return dot == std::string_view::npos ? std::string_view() : name.substr(dot + 1);
}

const LogField* subject(std::string_view name) {
  if (tFields == nullptr || name.empty()) return nullptr;
  for (const auto& f : *tFields) {
    if (f.key == name) return &f;
  }
  return nullptr;
}

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

void appendJsonMember(std::string_view key, std::string_view value, spdlog::memory_buf_t& dest) {
  dest.append(std::string_view(",\""));
  appendEscaped(key, dest);
  dest.append(std::string_view("\":\""));
  appendEscaped(value, dest);
  dest.push_back('"');
}

// %* : the message as a JSON string's contents.
class JsonMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    appendEscaped(std::string_view(msg.payload.data(), msg.payload.size()), dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessage>(); }
};

// %F : ,"key":"value" for each of the line's fields, then "object" and "owner" while a
// LogObject is alive on this thread.
class JsonFields final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    if (tFields != nullptr) {
      for (const auto& f : *tFields) appendJsonMember(f.key, f.value, dest);
    }
    if (!tObject.empty()) appendJsonMember("object", tObject, dest);
    if (!tObject.empty() && !tOwner.empty()) appendJsonMember("owner", tOwner, dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonFields>(); }
};

// %N : "lease: ", or "lease podshaper-system/podshaper-operator: " when a field is named
// as the logger; nothing for the binary's own logger.
class TextName final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string_view name = shortName(msg);
    if (name.empty()) return;
    dest.append(name);
    if (const LogField* about = subject(name)) {
      dest.push_back(' ');
      dest.append(std::string_view(about->value));
    }
    dest.append(std::string_view(": "));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<TextName>(); }
};

// A value as it is, or quoted as a JSON string where it would not read as one word.
void appendTextValue(std::string_view value, spdlog::memory_buf_t& dest) {
  const bool plain = !value.empty() && std::none_of(value.begin(), value.end(), [](char c) {
    return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '"' || c == '\\' || c == '=' || c == ',' ||
           c == '(' || c == ')';
  });
  if (plain) {
    dest.append(value);
    return;
  }
  dest.push_back('"');
  appendEscaped(value, dest);
  dest.push_back('"');
}

// %F in text: " (key=value, key=value)", the fields but the one after the name.
class TextFields final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    if (tFields == nullptr) return;
    const std::string_view name = shortName(msg);
    bool first = true;
    for (const auto& f : *tFields) {
      if (!name.empty() && f.key == name) continue;
      dest.append(std::string_view(first ? " (" : ", "));
      first = false;
      dest.append(f.key);
      dest.push_back('=');
      appendTextValue(f.value, dest);
    }
    if (!first) dest.push_back(')');
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<TextFields>(); }
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
  auto formatter = std::make_unique<spdlog::pattern_formatter>(
      options.format == "json" ? spdlog::pattern_time_type::utc : spdlog::pattern_time_type::local);
  if (options.format == "json") {
    formatter->add_flag<JsonMessage>('*').add_flag<JsonFields>('F').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","logger":"%n","msg":"%*"%F})");
  } else {
    formatter->add_flag<TextName>('N').add_flag<TextFields>('F').set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %N%v%F");
  }
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::from_str(options.level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
  auto& all = loggers();
  std::lock_guard lock(all.mu);
  all.binary = name;
  for (auto& [key, made] : all.byName) made->logger_ = makeLogger(key);
}

const Logger& logger(std::string_view name) {
  // A call site may look its logger up on each line (a webhook thread, per admission):
  // each thread keeps those it found, so that no lock is shared. Loggers are never freed.
  thread_local std::vector<const Logger*> found;
  for (const Logger* l : found) {
    if (l->name() == name) return *l;
  }
  auto& all = loggers();
  std::lock_guard lock(all.mu);
  auto at = all.byName.find(name);
  if (at == all.byName.end()) {
    auto made = std::make_unique<Logger>(std::string(name));
    made->logger_ = makeLogger(made->name());
    at = all.byName.emplace(std::string(name), std::move(made)).first;
  }
  found.push_back(at->second.get());
  return *at->second;
}

void Logger::log(spdlog::level::level_enum level, LogFields fields, fmt::string_view format, fmt::format_args args) const {
  if (!logger_->should_log(level)) return;
  spdlog::memory_buf_t text;
  fmt::vformat_to(std::back_inserter(text), format, args);
  struct Restore {
    const LogFields* previous;
    ~Restore() { tFields = previous; }
  } restore{std::exchange(tFields, &fields)};
  logger_->log(level, spdlog::string_view_t(text.data(), text.size()));
}

LogObject::LogObject(std::string object, std::string owner)
    : previousObject_(std::exchange(tObject, std::move(object))), previousOwner_(std::exchange(tOwner, std::move(owner))) {}

LogObject::~LogObject() {
  tObject = std::move(previousObject_);
  tOwner = std::move(previousOwner_);
}

}  // namespace podshaper::cli
