#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"

namespace podshaper::cli {

// `--name value` and `--name=value` flags after a subcommand; `--flag` alone for booleans;
// `-x value` where `shortNames` maps x to a name (as kubectl's -f and -n).
class Flags {
 public:
  // Parses argv[first..]; names outside `valued` and `boolean` are errors.
  static Result<Flags> parse(int argc, char** argv, int first, const std::set<std::string>& valued,
                             const std::set<std::string>& boolean = {},
                             const std::map<std::string, std::string>& shortNames = {});

  std::optional<std::string> get(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback) const;
  // Every value a flag given more than once had, in order (kubectl's -f a -f b); get() is the last.
  std::vector<std::string> getAll(const std::string& name) const;
  bool has(const std::string& name) const { return values_.contains(name); }
  // An error naming the first of `names` that is missing.
  Result<void> require(const std::vector<std::string>& names) const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_;
};

// Whether a subcommand's arguments (argv[first..]) ask for its help: --help or -h, as
// kubectl takes them anywhere on the line.
bool asksHelp(int argc, char** argv, int first = 2);

// --listen HOST:PORT ("[::1]:8443", ":8443" for every address).
struct Listen {
  std::string host;
  uint16_t port = 0;
};
Result<Listen> parseListen(const std::string& text);

// Reads a whole file; the error names the path and the reason.
Result<std::string> readFile(const std::string& path);

}  // namespace podshaper::cli
