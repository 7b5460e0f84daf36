#include "cli/flags.h"

#include "base/quantity.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace podshaper::cli {

Result<Flags> Flags::parse(int argc, char** argv, int first, const std::set<std::string>& valued,
                           const std::set<std::string>& boolean,
                           const std::map<std::string, std::string>& shortNames) {
  Flags flags;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      auto it = shortNames.find(arg.substr(1, 1));
      if (it == shortNames.end()) return makeError("unknown flag " + arg.substr(0, 2));
      arg = "--" + it->second + (arg.size() > 2 ? "=" + arg.substr(arg[2] == '=' ? 3 : 2) : "");
    }
    if (!arg.starts_with("--")) return makeError("unexpected argument \"" + arg + "\"");
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (boolean.contains(name)) {
      if (value) return makeError("--" + name + " takes no value");
      flags.values_[name] = "true";
      continue;
    }
    if (!valued.contains(name)) return makeError("unknown flag --" + name);
    if (!value) {
      if (i + 1 >= argc) return makeError("--" + name + " needs a value");
      value = argv[++i];
    }
    flags.values_[name] = *value;
    flags.all_[name].push_back(*value);
  }
  return flags;
}

bool asksHelp(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

std::optional<std::string> Flags::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Flags::get(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

std::vector<std::string> Flags::getAll(const std::string& name) const {
  auto it = all_.find(name);
  return it == all_.end() ? std::vector<std::string>() : it->second;
}

Result<void> Flags::require(const std::vector<std::string>& names) const {
  for (const auto& n : names) {
    if (!has(n)) return makeError("--" + n + " is required");
  }
  return {};
}

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(path + ": " + std::strerror(errno));
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return makeError(path + ": read failed");
  return out.str();
}

Result<Listen> parseListen(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) return makeError("--listen \"" + text + "\": expected HOST:PORT");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  auto port = parseCount(text.substr(colon + 1));
  if (!port || *port > 65535) return makeError("--listen \"" + text + "\": bad port");
  return Listen{host, static_cast<uint16_t>(*port)};
}

}  // namespace podshaper::cli
