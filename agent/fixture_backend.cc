#include <sstream>
#include <vector>

#include "agent/backend.h"
#include "cli/flags.h"

namespace podshaper::agent {
namespace {

// The shape of the matrices in an nvidia-smi output, enough to tell a `topo -m`
// output from a `topo -p2p r` one and to compare their sizes before they are
// parsed together (the parser reads only the pairs the topo -m matrix names, so
// it would not notice a P2P matrix of another size).
struct MatrixShape {
  int gpuColumns = 0;
  int gpuRows = 0;
  bool cpuColumn = false;  // `topo -m` has CPU Affinity columns; `-p2p r` has none
};

std::string stripAnsi(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= '@' && text[i] <= '~')) ++i;
      continue;
    }
    out += text[i];
  }
  return out;
}

bool isGpuName(const std::string& token) {
  if (token.size() <= 3 || token.compare(0, 3, "GPU") != 0) return false;
  for (std::size_t i = 3; i < token.size(); ++i) {
    if (token[i] < '0' || token[i] > '9') return false;
  }
  return true;
}

// One entry per matrix: a header line starts with GPU0 followed by another GPU,
// a NIC or CPU column (or nothing, for one GPU); rows start with a GPU name.
std::vector<MatrixShape> matrixShapes(const std::string& text) {
  std::vector<MatrixShape> shapes;
  std::istringstream in(stripAnsi(text));
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<std::string> t;
    for (std::string w; words >> w;) t.push_back(w);
    if (t.empty()) continue;
    if (t[0] == "GPU0" && (t.size() == 1 || isGpuName(t[1]) || t[1] == "CPU" || t[1].compare(0, 3, "NIC") == 0)) {
      MatrixShape shape;
      for (const auto& c : t) {
        if (c == "CPU") {
          shape.cpuColumn = true;
          break;
        }
        if (isGpuName(c)) ++shape.gpuColumns;
      }
      shapes.push_back(shape);
    } else if (isGpuName(t[0]) && !shapes.empty()) {
      ++shapes.back().gpuRows;
    }
  }
  return shapes;
}

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
    if (matrixShapes(*text).size() > 1) {
      return makeError(path_ + ": already holds a P2P matrix after the topo -m one; give the topo -m output alone, "
                       "or drop --p2p-fixture");
    }
    auto shapes = matrixShapes(*p2p);
    if (shapes.empty()) {
      return makeError(p2pPath_ + ": no nvidia-smi topo -p2p r matrix (a header line starting with GPU0) found");
    }
    if (shapes.size() > 1) {
      return makeError(p2pPath_ + ": holds " + std::to_string(shapes.size()) +
                       " matrices; expected the output of nvidia-smi topo -p2p r alone");
    }
    const MatrixShape& shape = shapes.front();
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
