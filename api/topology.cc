#include "api/topology.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "base/json_util.h"
#include "base/quantity.h"

namespace podshaper {
namespace {

std::string stripAnsi(std::string_view text) {
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

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

std::optional<int> gpuIndex(std::string_view token) {
  if (!token.starts_with("GPU") || token.size() == 3) return std::nullopt;
  auto n = parseCount(token.substr(3));
  if (!n || *n > 1024) return std::nullopt;
  return static_cast<int>(*n);
}

// One matrix: the header's device columns and each GPU row's cells.
struct Matrix {
  std::vector<std::string> columns;                // GPU0.., NIC0..
  std::map<int, std::vector<std::string>> rows;    // GPU index → all tokens after the name
  bool cpuColumn = false;                          // `topo -m` has CPU Affinity columns; `-p2p r` none
};

const std::vector<std::string> kLinkWords = {"X", "PIX", "PXB", "PHB", "NODE", "SYS"};
const std::vector<std::string> kP2PWords = {"X", "OK", "NS", "CNS", "GNS", "TNS", "U"};

// NV<n>: n NVLinks join the pair. nvidia-smi never prints NV0, and a count past
// 1024 is no real link count: NV4294967314 wrapped to 18 in the int, and NV2000
// did not survive toJson → topologyFromJson (which reads nvlinks up to 1024).
std::optional<int> nvlinkCount(const std::string& cell) {
  if (!cell.starts_with("NV") || cell.size() == 2) return std::nullopt;
  auto n = parseCount(cell.substr(2));
  if (!n || *n == 0 || *n > 1024) return std::nullopt;
  return static_cast<int>(*n);
}

bool isLink(const std::string& cell) {
  if (nvlinkCount(cell)) return true;
  for (const auto& w : kLinkWords) if (cell == w) return true;
  return false;
}

bool isP2P(const std::string& cell) {
  for (const auto& w : kP2PWords) if (cell == w) return true;
  return false;
}

// Every matrix in an nvidia-smi output, in order. A header line names columns,
// starting with GPU0; a row starts with a GPU name and then holds cells (X, NV#,
// OK, ...), never another GPU name.
std::vector<Matrix> readMatrices(std::string_view raw) {
  std::istringstream in(stripAnsi(raw));
  std::vector<Matrix> matrices;
  for (std::string line; std::getline(in, line);) {
    auto t = tokens(line);
    if (t.empty()) continue;
    if (t[0] == "GPU0" && (t.size() == 1 || gpuIndex(t[1]) || t[1] == "CPU" || t[1].starts_with("NIC"))) {
      Matrix m;
      for (const auto& c : t) {
        if (c == "CPU") {
          m.cpuColumn = true;
          break;
        }
        m.columns.push_back(c);
      }
      matrices.push_back(std::move(m));
      continue;
    }
    auto row = gpuIndex(t[0]);
    if (row && !matrices.empty()) {
      matrices.back().rows[*row] = std::vector<std::string>(t.begin() + 1, t.end());
    }
  }
  return matrices;
}

std::optional<uint32_t> u32(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > UINT32_MAX) return std::nullopt;
  } else if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > UINT32_MAX) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(v.get<uint64_t>());
}

// A GPU's fabric as toJson writes it. The error names the field:
//   spec.gpus[0].fabric.state: expected NotStarted, InProgress, Completed or Unknown
Result<GpuFabric> fabricFromJson(const nlohmann::json& f, const std::string& at) {
  if (!f.is_object()) return makeError(at + ": expected an object");
  GpuFabric fabric;
  fabric.clusterUuid = stringMember(f, "clusterUuid");
  if (!isUuidText(fabric.clusterUuid)) {
    return makeError(at + ".clusterUuid: expected a UUID (8-4-4-4-12 lower-case hex digits)");
  }
  auto clique = u32(member(f, "cliqueId"));
  if (!clique) return makeError(at + ".cliqueId: expected an integer from 0 to 4294967295");
  fabric.cliqueId = *clique;
  fabric.state = stringMember(f, "state");
  if (fabric.state != "NotStarted" && fabric.state != "InProgress" && fabric.state != "Completed" &&
      fabric.state != "Unknown") {
    return makeError(at + ".state: expected NotStarted, InProgress, Completed or Unknown");
  }
  fabric.status = stringMember(f, "status");
  if (fabric.status.empty()) return makeError(at + ".status: expected NVML's status (Success, or its error)");
  const nlohmann::json& mask = member(f, "healthMask");
  if (!mask.is_null()) {
    fabric.healthMask = u32(mask);
    if (!fabric.healthMask) return makeError(at + ".healthMask: expected an integer from 0 to 4294967295, or null");
  }
  return fabric;
}

}  // namespace

bool isUuidText(std::string_view text) {
  if (text.size() != 36) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f'))) {
      return false;
    }
  }
  return true;
}

std::vector<NvidiaSmiMatrixShape> nvidiaSmiMatrixShapes(std::string_view text) {
  std::vector<NvidiaSmiMatrixShape> shapes;
  for (const auto& m : readMatrices(text)) {
    NvidiaSmiMatrixShape shape;
    for (const auto& c : m.columns) shape.gpuColumns += gpuIndex(c) ? 1 : 0;
    shape.gpuRows = static_cast<int>(m.rows.size());
    shape.cpuColumn = m.cpuColumn;
    shapes.push_back(shape);
  }
  return shapes;
}

Result<Topology> parseNvidiaSmiTopology(std::string_view raw) {
  std::vector<Matrix> matrices = readMatrices(raw);
  if (matrices.empty()) return makeError("topology: no nvidia-smi matrix (a header line starting with GPU0) found");

  const Matrix& links = matrices[0];
  int gpuColumns = 0;
  for (const auto& c : links.columns) if (gpuIndex(c)) ++gpuColumns;
  if (static_cast<int>(links.rows.size()) != gpuColumns) {
    return makeError("topology: the matrix has " + std::to_string(gpuColumns) + " GPU columns but " +
                     std::to_string(links.rows.size()) + " GPU rows");
  }
  Topology topo;
  for (int i = 0; i < gpuColumns; ++i) {
    auto it = links.rows.find(i);
    if (it == links.rows.end()) return makeError("topology: row GPU" + std::to_string(i) + " is missing");
    const auto& cells = it->second;
    if (cells.size() < links.columns.size()) {
      return makeError("topology: row GPU" + std::to_string(i) + " has " + std::to_string(cells.size()) +
                       " cells, fewer than its " + std::to_string(links.columns.size()) + " columns");
    }
    for (int j = 0; j < gpuColumns; ++j) {
      if (!isLink(cells[j])) {
        return makeError("topology: GPU" + std::to_string(i) + "/GPU" + std::to_string(j) + ": \"" + cells[j] +
                         "\" is not a link class (NV#, PIX, PXB, PHB, NODE, SYS)");
      }
      if ((i == j) != (cells[j] == "X")) {
        return makeError("topology: GPU" + std::to_string(i) + "/GPU" + std::to_string(j) + ": \"" + cells[j] +
                         "\" on " + (i == j ? "the diagonal" : "a pair"));
      }
    }
    GpuInfo gpu;
    gpu.index = i;
    std::size_t rest = links.columns.size();
    if (rest < cells.size()) gpu.cpuAffinity = cells[rest];
    if (rest + 1 < cells.size()) {
      auto numa = parseCount(cells[rest + 1]);
      if (numa && *numa < 1024) gpu.numaNode = static_cast<int>(*numa);
    }
    topo.gpus.push_back(gpu);
  }

  const Matrix* p2p = matrices.size() > 1 ? &matrices[1] : nullptr;
  for (int a = 0; a < gpuColumns; ++a) {
    for (int b = a + 1; b < gpuColumns; ++b) {
      GpuPair pair;
      pair.a = a;
      pair.b = b;
      pair.link = links.rows.at(a)[b];
      if (pair.link != links.rows.at(b)[a]) {
        return makeError("topology: GPU" + std::to_string(a) + "/GPU" + std::to_string(b) + " is " + pair.link +
                         " one way and " + links.rows.at(b)[a] + " the other");
      }
      if (auto n = nvlinkCount(pair.link)) {
        pair.nvlinks = *n;
      } else {
        pair.pcie = pair.link;
      }
      if (p2p != nullptr) {
        auto row = p2p->rows.find(a);
        if (row == p2p->rows.end() || static_cast<int>(row->second.size()) <= b || !isP2P(row->second[b])) {
          return makeError("topology: the P2P matrix has no status for GPU" + std::to_string(a) + "/GPU" +
                           std::to_string(b));
        }
        pair.p2p.read = row->second[b];
      }
      topo.pairs.push_back(pair);
    }
  }
  return topo;
}

nlohmann::json toJson(const Topology& t) {
  using nlohmann::json;
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  json gpus = json::array();
  for (const auto& g : t.gpus) {
    json gpu = {{"index", g.index}, {"uuid", g.uuid}, {"name", g.name}, {"pciBusId", g.pciBusId},
                {"memoryBytes", opt(g.memoryBytes)}, {"numaNode", opt(g.numaNode)}, {"cpuAffinity", g.cpuAffinity}};
    if (g.fabric) {  // only where there is one: reports of nodes without a fabric stay as they were
      gpu["fabric"] = {{"clusterUuid", g.fabric->clusterUuid}, {"cliqueId", g.fabric->cliqueId},
                       {"state", g.fabric->state}, {"status", g.fabric->status},
                       {"healthMask", opt(g.fabric->healthMask)}};
    }
    gpus.push_back(std::move(gpu));
  }
  json pairs = json::array();
  for (const auto& p : t.pairs) {
    json pair = {{"a", p.a}, {"b", p.b}, {"link", p.link}, {"nvlinks", p.nvlinks},
                 {"p2p", {{"read", p.p2p.read}, {"write", p.p2p.write}, {"atomics", p.p2p.atomics}}},
                 {"cudaPeerAccess", opt(p.cudaPeerAccess)}};
    pair["pcie"] = p.pcie.empty() ? json(nullptr) : json(p.pcie);
    if (p.bandwidthGBps) pair["bandwidthGBps"] = *p.bandwidthGBps;
    pairs.push_back(std::move(pair));
  }
  const HostInfo& h = t.host;
  json host = {{"memoryBytes", opt(h.memoryBytes)}, {"memlockBytes", opt(h.memlockBytes)},
               {"modules", {{"nvidia_fs", h.nvidiaFs}, {"nvidia_peermem", h.nvidiaPeermem}}},
               {"driverVersion", h.driverVersion}, {"cudaVersion", h.cudaVersion}};
  if (h.memlockProbe) {
    host["memlockProbe"] = {{"requested", h.memlockProbe->requested.text()},
                            {"granted", h.memlockProbe->granted},
                            {"message", h.memlockProbe->message}};
  }
  return {{"gpus", gpus}, {"pairs", pairs}, {"host", host}};
}


Result<Topology> topologyFromJson(const nlohmann::json& spec) {
  using nlohmann::json;
  if (!spec.is_object()) return makeError("spec: expected an object");
  auto index = [](const json& o, const char* key) -> std::optional<int> {
    if (!o.contains(key) || !o[key].is_number_integer()) return std::nullopt;
    auto v = o[key].get<long long>();
    if (v < 0 || v > 1024) return std::nullopt;
    return static_cast<int>(v);
  };
  auto u64 = [](const json& o, const char* key) -> std::optional<uint64_t> {
    if (!o.contains(key) || !o[key].is_number_integer() || o[key].get<long long>() < 0) return std::nullopt;
    return o[key].get<uint64_t>();
  };
  Topology t;
  const json gpus = spec.value("gpus", json::array());
  const json pairs = spec.value("pairs", json::array());
  if (!gpus.is_array()) return makeError("spec.gpus: expected a list");
  if (!pairs.is_array()) return makeError("spec.pairs: expected a list");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const json& g = gpus[i];
    const std::string at = "spec.gpus[" + std::to_string(i) + "]";
    if (!g.is_object()) return makeError(at + ": expected an object");
    GpuInfo info;
    auto idx = index(g, "index");
    if (!idx) return makeError(at + ".index: expected a GPU index");
    info.index = *idx;
    info.uuid = stringMember(g, "uuid");
    info.name = stringMember(g, "name");
    info.pciBusId = stringMember(g, "pciBusId");
    info.memoryBytes = u64(g, "memoryBytes");
    info.numaNode = index(g, "numaNode");
    info.cpuAffinity = stringMember(g, "cpuAffinity");
    if (g.contains("fabric") && !g["fabric"].is_null()) {
      auto fabric = fabricFromJson(g["fabric"], at + ".fabric");
      if (!fabric) return fabric.error();
      info.fabric = std::move(*fabric);
    }
    t.gpus.push_back(std::move(info));
  }
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const json& p = pairs[i];
    const std::string at = "spec.pairs[" + std::to_string(i) + "]";
    if (!p.is_object()) return makeError(at + ": expected an object");
    GpuPair pair;
    auto a = index(p, "a"), b = index(p, "b");
    if (!a) return makeError(at + ".a: expected a GPU index");
    if (!b) return makeError(at + ".b: expected a GPU index");
    pair.a = *a;
    pair.b = *b;
    pair.link = stringMember(p, "link");
    if (pair.link.empty()) return makeError(at + ".link: missing");
    pair.nvlinks = index(p, "nvlinks").value_or(0);
    pair.pcie = stringMember(p, "pcie");
    if (p.contains("p2p") && p["p2p"].is_object()) {
      const json& s = p["p2p"];
      if (auto r = stringMember(s, "read"); !r.empty()) pair.p2p.read = r;
      if (auto w = stringMember(s, "write"); !w.empty()) pair.p2p.write = w;
      if (auto x = stringMember(s, "atomics"); !x.empty()) pair.p2p.atomics = x;
    }
    if (p.contains("cudaPeerAccess") && p["cudaPeerAccess"].is_boolean()) pair.cudaPeerAccess = p["cudaPeerAccess"].get<bool>();
    if (p.contains("bandwidthGBps") && p["bandwidthGBps"].is_number()) pair.bandwidthGBps = p["bandwidthGBps"].get<double>();
    t.pairs.push_back(std::move(pair));
  }
  const json host = spec.value("host", json::object());
  if (host.is_object()) {
    t.host.memoryBytes = u64(host, "memoryBytes");
    t.host.memlockBytes = u64(host, "memlockBytes");
    if (host.contains("modules") && host["modules"].is_object()) {
      const json& m = host["modules"];
      t.host.nvidiaFs = m.contains("nvidia_fs") && m["nvidia_fs"].is_boolean() && m["nvidia_fs"].get<bool>();
      t.host.nvidiaPeermem =
          m.contains("nvidia_peermem") && m["nvidia_peermem"].is_boolean() && m["nvidia_peermem"].get<bool>();
    }
    t.host.driverVersion = stringMember(host, "driverVersion");
    t.host.cudaVersion = stringMember(host, "cudaVersion");
    if (host.contains("memlockProbe") && !host["memlockProbe"].is_null()) {
      const json& m = host["memlockProbe"];
      if (!m.is_object()) return makeError("spec.host.memlockProbe: expected an object");
      MemlockProbe probe;
      auto requested = parseMemlockLimit(stringMember(m, "requested"));
      if (!requested) return makeError("spec.host.memlockProbe.requested: " + requested.error().message);
      probe.requested = *requested;
      if (!m.contains("granted") || !m["granted"].is_boolean()) {
        return makeError("spec.host.memlockProbe.granted: expected true or false");
      }
      probe.granted = m["granted"].get<bool>();
      probe.message = stringMember(m, "message");
      t.host.memlockProbe = std::move(probe);
    }
  }
  return t;
}

}  // namespace podshaper

namespace podshaper {

std::string renderTopologyTable(const Topology& t) {
  const int n = static_cast<int>(t.gpus.size());
  if (n == 0) return "no GPUs\nverdict: no GPUs on this node\n";
  std::vector<std::vector<const GpuPair*>> at(n, std::vector<const GpuPair*>(n, nullptr));
  for (const auto& p : t.pairs) {
    if (p.a < n && p.b < n) at[p.a][p.b] = at[p.b][p.a] = &p;
  }
  std::ostringstream out;
  auto header = [&](const char* extra) {
    out << "\t";
    for (int j = 0; j < n; ++j) out << "GPU" << j << "\t";
    out << extra << "\n";
  };
  header("CPU Affinity\tNUMA Affinity");
  for (int i = 0; i < n; ++i) {
    out << "GPU" << i;
    for (int j = 0; j < n; ++j) out << "\t" << (i == j ? " X " : at[i][j] ? at[i][j]->link : "?");
    out << "\t" << t.gpus[i].cpuAffinity << "\t" << (t.gpus[i].numaNode ? std::to_string(*t.gpus[i].numaNode) : "N/A")
        << "\n";
  }
  out << "\n";
  header("");
  for (int i = 0; i < n; ++i) {
    out << "GPU" << i;
    for (int j = 0; j < n; ++j) out << "\t" << (i == j ? "X" : at[i][j] ? at[i][j]->p2p.read : "?");
    out << "\n";
  }
  for (const auto& p : t.pairs) {
    if (p.bandwidthGBps) {
      char line[96];
      std::snprintf(line, sizeof line, "GPU%d <-> GPU%d: %.1f GB/s one way (cuMemcpyPeerAsync)\n", p.a, p.b,
                    *p.bandwidthGBps);
      out << (&p == &t.pairs.front() ? "\n" : "") << line;
    }
  }
  int noP2P = 0, unknown = 0, nvlink = 0;
  for (const auto& p : t.pairs) {
    if (p.p2p.read == "U") ++unknown;
    else if (p.p2p.read != "OK") ++noP2P;
    if (p.nvlinks > 0) ++nvlink;
  }
  const int pairs = static_cast<int>(t.pairs.size());
  out << "\nverdict: " << n << " GPUs, " << nvlink << "/" << pairs << " pairs over NVLink, ";
  if (noP2P > 0) {
    out << noP2P << "/" << pairs << " pairs without P2P read (NCCL falls back to shared memory there)";
  } else if (unknown > 0) {
    out << "P2P unknown for " << unknown << "/" << pairs << " pairs";
  } else {
    out << "P2P between all pairs";
  }
  if (t.host.memoryBytes) {  // known only when probed on the node itself
    out << ", memlock " << (t.host.memlockBytes ? std::to_string(*t.host.memlockBytes) + " bytes" : "unlimited");
  }
  out << "\n";
  if (auto domain = nvlinkDomainOf(t)) {
    out << domain->sentence() << "\n";
    if (domain->problem != NvlinkDomain::Problem::kNone && domain->problem != NvlinkDomain::Problem::kMixed &&
        domain->problem != NvlinkDomain::Problem::kUnhealthy) {
      out << "  " << domain->problemWords << "\n";
    }
  }
  return out.str();
}

}  // namespace podshaper
