#include "agent/backend.h"
#include "cli/flags.h"

namespace podshaper::agent {
namespace {

class FixtureBackend : public Backend {
 public:
  explicit FixtureBackend(std::string path) : path_(std::move(path)) {}
  Result<Topology> probe() override {
    auto text = cli::readFile(path_);
    if (!text) return makeError("fixture: " + text.error().message);
    auto topo = parseNvidiaSmiTopology(*text);
    if (!topo) return makeError(path_ + ": " + topo.error().message);
    return topo;
  }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<Backend> makeFixtureBackend(std::string path) {
  return std::make_unique<FixtureBackend>(std::move(path));
}

}  // namespace podshaper::agent
