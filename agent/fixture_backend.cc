#include "agent/backend.h"
#include "cli/flags.h"

namespace podshaper::agent {
namespace {

std::string gpus(int n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

class FixtureBackend : public Backend {
 public:
  FixtureBackend(std::string path, std::string p2pPath) : path_(std::move(path)), p2pPath_(std::move(p2pPath)) {}

  Result<Topology> probe() override {
    auto text = cli::readFile(path_);
    if (!text) return makeError("fixture: " + text.error().message);
    auto topo = parseNvidiaSmiTopology(*text);
    if (!topo) return makeError(path_ + ": " + topo.error().message);
    if (p2pPath_.empty()) return topo;

    auto p2p = cli::readFile(p2pPath_);
    if (!p2p) return makeError("p2p fixture: " + p2p.error().message);
    if (nvidiaSmiMatrixShapes(*text).size() > 1) {
      return makeError(path_ + ": already holds a P2P matrix after the topo -m one; give the topo -m output alone, "
                       "or drop --p2p-fixture");
    }
    auto shapes = nvidiaSmiMatrixShapes(*p2p);
    if (shapes.empty()) {
      return makeError(p2pPath_ + ": no nvidia-smi topo -p2p r matrix (a header line starting with GPU0) found");
    }
    if (shapes.size() > 1) {
      return makeError(p2pPath_ + ": holds " + std::to_string(shapes.size()) +
                       " matrices; expected the output of nvidia-smi topo -p2p r alone");
    }
    const NvidiaSmiMatrixShape& shape = shapes.front();
    if (shape.cpuColumn) {
      return makeError(p2pPath_ + ": is an nvidia-smi topo -m matrix (it has a CPU Affinity column), not topo -p2p r");
    }
    const int n = static_cast<int>(topo->gpus.size());
    if (shape.gpuColumns != n || shape.gpuRows != n) {
      return makeError(p2pPath_ + ": the P2P matrix has " + std::to_string(shape.gpuColumns) + " GPU columns and " +
                       std::to_string(shape.gpuRows) + " GPU rows, but " + path_ + " has " + gpus(n) +
                       ": they are not from the same node");
    }
    auto both = parseNvidiaSmiTopology(*text + "\n" + *p2p);
    if (!both) return makeError(p2pPath_ + ": " + both.error().message);
    return both;
  }

 private:
  std::string path_, p2pPath_;
};

}  // namespace

std::unique_ptr<Backend> makeFixtureBackend(std::string path, std::string p2pPath) {
  return std::make_unique<FixtureBackend>(std::move(path), std::move(p2pPath));
}

}  // namespace podshaper::agent
