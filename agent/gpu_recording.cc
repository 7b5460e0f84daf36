#include "agent/gpu_recording.h"

#include <array>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/json_util.h"

namespace podshaper::agent {
namespace {

using nlohmann::json;

constexpr std::pair<int, const char*> kP2PCapsNames[] = {{NVML_P2P_CAPS_INDEX_READ, "read"},
                                                         {NVML_P2P_CAPS_INDEX_WRITE, "write"},
                                                         {NVML_P2P_CAPS_INDEX_NVLINK, "nvlink"},
                                                         {NVML_P2P_CAPS_INDEX_ATOMICS, "atomics"}};
constexpr std::pair<NvmlOpenError::Kind, const char*> kOpenKinds[] = {
    {NvmlOpenError::Kind::kNotLoadable, "notLoadable"},
    {NvmlOpenError::Kind::kInitFailed, "initFailed"},
    {NvmlOpenError::Kind::kIncomplete, "incomplete"}};

template <class T>
void put(json& object, const char* key, const std::optional<T>& value) {
  if (value) object[key] = *value;
}

// ---- recording -------------------------------------------------------------

json recordGpu(const Nvml& nvml, nvmlDevice_t device, const std::vector<nvmlDevice_t>& handles, unsigned self) {
  json gpu = json::object();
  put(gpu, "uuid", nvml.uuid(device));
  put(gpu, "name", nvml.name(device));
  put(gpu, "pciBusId", nvml.pciBusId(device));
  put(gpu, "memoryTotal", nvml.memoryTotal(device));
  put(gpu, "numaNode", nvml.numaNode(device));
  if (auto mask = nvml.cpuAffinity(device, kAffinityWords)) {
    while (mask->size() > 1 && mask->back() == 0) mask->pop_back();  // the words past the last CPU
    gpu["cpuAffinity"] = *mask;
  }
  gpu["computeIdle"] = nvml.computeIdle(device);
  json links = json::array();
  for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    json entry = {{"link", link}, {"active", nvml.nvLinkActive(device, link)}};
    put(entry, "remoteType", nvml.nvLinkRemoteType(device, link));
    put(entry, "remoteBusId", nvml.nvLinkRemoteBusId(device, link));
    if (entry["active"].get<bool>() || entry.size() > 2) links.push_back(std::move(entry));
  }
  gpu["nvlinks"] = std::move(links);
  json peers = json::array();
  for (unsigned other = 0; other < handles.size(); ++other) {
    if (other == self || !handles[other]) continue;
    json peer = {{"gpu", other}};
    put(peer, "commonAncestor", nvml.commonAncestor(device, handles[other]));
    json p2p = json::object();
    for (auto [caps, name] : kP2PCapsNames) p2p[name] = nvml.p2pStatus(device, handles[other], caps);
    peer["p2p"] = std::move(p2p);
    peers.push_back(std::move(peer));
  }
  gpu["peers"] = std::move(peers);
  if (auto fabric = nvml.gpuFabricInfo(device)) {
    gpu["fabric"] = {{"clusterUuid", uuidText(fabric->clusterUuid)},
                     {"status", fabric->status},
                     {"cliqueId", fabric->cliqueId},
                     {"state", fabric->state}};
    put(gpu["fabric"], "healthMask", fabric->healthMask);
  }
  return gpu;
}

json recordNvml(const GpuSources& sources) {
  json out = json::object();
  auto opened = sources.openNvml();
  if (!opened) {
    const char* kind = "incomplete";
    for (auto [k, name] : kOpenKinds) {
      if (k == opened.error().kind) kind = name;
    }
    out["open"] = {{"kind", kind}, {"message", opened.error().message}};
    return out;
  }
  const Nvml& nvml = **opened;
  put(out, "driverVersion", nvml.driverVersion());
  put(out, "cudaDriverVersion", nvml.cudaDriverVersion());
  auto count = nvml.deviceCount();
  if (!count) {
    out["deviceCount"] = {{"error", count.error().message}};
    return out;
  }
  out["deviceCount"] = *count;
  std::vector<nvmlDevice_t> handles(*count, nullptr);
  std::vector<std::string> handleErrors(*count);
  for (unsigned i = 0; i < *count; ++i) {
    auto handle = nvml.deviceByIndex(i);
    if (handle) handles[i] = *handle;
    else handleErrors[i] = handle.error().message;
  }
  json gpus = json::array();
  for (unsigned i = 0; i < *count; ++i) {
    gpus.push_back(handles[i] ? recordGpu(nvml, handles[i], handles, i) : json{{"error", handleErrors[i]}});
  }
  out["gpus"] = std::move(gpus);
  return out;
}

json recordCuda(const GpuSources& sources) {
  auto opened = sources.openCuda();
  if (!opened) return {{"open", {{"message", opened.error().message}}}};
  const Cuda& cuda = **opened;
  json devices = json::array();
  std::vector<std::optional<Cuda::Device>> found;
  for (int i = 0; i < cuda.deviceCount(); ++i) {
    found.push_back(cuda.device(i));
    devices.push_back(found.back() ? json{{"busId", found.back()->busId}} : json());
  }
  json access = json::array();
  for (const auto& a : found) {
    json row = json::array();
    for (const auto& b : found) {
      std::optional<bool> can;
      if (a && b && &a != &b) can = cuda.canAccessPeer(a->handle, b->handle);
      row.push_back(can ? json(*can) : json());
    }
    access.push_back(std::move(row));
  }
  return {{"devices", std::move(devices)}, {"canAccessPeer", std::move(access)}};
}

json recordSysfs(const GpuSources& sources, const json& nvml) {
  json files = json::object();
  auto keep = [&](const std::string& path) {
    auto text = sources.readSysfs(path);
    if (text) files[path] = *text;
    return text.has_value();
  };
  for (const json& gpu : member(nvml, "gpus")) {
    if (member(gpu, "pciBusId").is_string()) keep(sysfsNumaNodePath(gpu["pciBusId"].get<std::string>()));
  }
  for (int node = 0; node < kMaxNumaNodes; ++node) {
    if (!keep(sysfsCpuListPath(node))) break;  // the nodes are numbered from 0 up
  }
  return files;
}

// ---- replay ----------------------------------------------------------------

// A recording member that is not what it should be: its path and what was expected.
struct Malformed {
  std::string message;
};

[[noreturn]] void malformed(const std::string& path, const std::string& expected) {
  throw Malformed{path + ": expected " + expected};
}

// Readers of optional members: missing or null is nothing; another type is malformed.
std::optional<std::string> optString(const json& object, const char* key, const std::string& path) {
  const json& value = member(object, key);
  if (value.is_null()) return std::nullopt;
  if (!value.is_string()) malformed(path + "." + key, "a string");
  return value.get<std::string>();
}

// An integer that fits T: nlohmann's get<T>() would wrap one that does not.
template <class T>
bool fits(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  const int64_t v = value.get<int64_t>();
  if constexpr (std::is_unsigned_v<T>) {
    return v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else {
    return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
           v <= static_cast<int64_t>(std::numeric_limits<T>::max());
  }
}

template <class T>
std::optional<T> optNumber(const json& object, const char* key, const std::string& path) {
  const json& value = member(object, key);
  if (value.is_null()) return std::nullopt;
  if (!value.is_number_integer()) malformed(path + "." + key, "an integer");
  if (!fits<T>(value)) {
    malformed(path + "." + key, std::is_unsigned_v<T> ? "an integer from 0 to " + std::to_string(std::numeric_limits<T>::max())
                                                      : "an integer from " + std::to_string(std::numeric_limits<T>::min()) +
                                                            " to " + std::to_string(std::numeric_limits<T>::max()));
  }
  return value.get<T>();
}

const json& array(const json& object, const char* key, const std::string& path) {
  const json& value = member(object, key);
  if (!value.is_null() && !value.is_array()) malformed(path + "." + key, "an array");
  static const json kEmpty = json::array();
  return value.is_null() ? kEmpty : value;
}

struct RecordedLink {
  bool active = false;
  std::optional<int> remoteType;
  std::optional<std::string> remoteBusId;
};

struct RecordedPeer {
  std::optional<int> commonAncestor;
  std::array<int, 4> p2p{NVML_P2P_STATUS_UNKNOWN, NVML_P2P_STATUS_UNKNOWN, NVML_P2P_STATUS_UNKNOWN,
                         NVML_P2P_STATUS_UNKNOWN};
};

struct RecordedGpu {
  std::optional<std::string> handleError;
  std::optional<std::string> uuid, name, pciBusId;
  std::optional<uint64_t> memoryTotal;
  std::optional<unsigned> numaNode;
  std::optional<std::vector<unsigned long>> cpuAffinity;
  bool computeIdle = false;
  std::array<RecordedLink, NVML_NVLINK_MAX_LINKS> links{};
  std::map<unsigned, RecordedPeer> peers;
  std::optional<GpuFabricInfo> fabric;
};

struct NvmlRecording {
  std::optional<NvmlOpenError> openError;
  std::optional<std::string> driverVersion;
  std::optional<int> cudaDriverVersion;
  std::optional<std::string> countError;
  std::vector<RecordedGpu> gpus;
};

// NVML's fabric info as recordGpu writes it; missing or null where NVML gave none.
std::optional<GpuFabricInfo> readFabric(const json& in, const std::string& path) {
  if (in.is_null()) return std::nullopt;
  if (!in.is_object()) malformed(path, "an object");
  GpuFabricInfo fabric;
  auto uuid = optString(in, "clusterUuid", path);
  auto bytes = uuid ? uuidBytes(*uuid) : std::nullopt;
  if (!bytes) malformed(path + ".clusterUuid", "a UUID (8-4-4-4-12 lower-case hex digits)");
  fabric.clusterUuid = *bytes;
  auto status = optNumber<int>(in, "status", path);
  auto clique = optNumber<unsigned>(in, "cliqueId", path);
  auto state = optNumber<unsigned char>(in, "state", path);
  if (!status) malformed(path + ".status", "NVML's return code (0: success)");
  if (!clique) malformed(path + ".cliqueId", "an integer");
  if (!state) malformed(path + ".state", "NVML's fabric state (0 to 3)");
  fabric.status = *status;
  fabric.cliqueId = *clique;
  fabric.state = *state;
  fabric.healthMask = optNumber<unsigned>(in, "healthMask", path);
  return fabric;
}

RecordedGpu readGpu(const json& in, const std::string& path, unsigned self, unsigned count) {
  RecordedGpu gpu;
  if (!in.is_object()) malformed(path, "an object");
  if (auto error = optString(in, "error", path)) {
    gpu.handleError = *error;
    return gpu;
  }
  gpu.uuid = optString(in, "uuid", path);
  gpu.name = optString(in, "name", path);
  gpu.pciBusId = optString(in, "pciBusId", path);
  gpu.memoryTotal = optNumber<uint64_t>(in, "memoryTotal", path);
  gpu.numaNode = optNumber<unsigned>(in, "numaNode", path);
  const json& mask = member(in, "cpuAffinity");
  if (!mask.is_null()) {
    if (!mask.is_array()) malformed(path + ".cpuAffinity", "an array of 64-bit words");
    std::vector<unsigned long> words;
    for (const json& word : mask) {
      if (!word.is_number_integer() || !fits<unsigned long>(word)) {
        malformed(path + ".cpuAffinity", "an array of 64-bit words");
      }
      words.push_back(word.get<unsigned long>());
    }
    gpu.cpuAffinity = std::move(words);
  }
  const json& idle = member(in, "computeIdle");
  if (!idle.is_null() && !idle.is_boolean()) malformed(path + ".computeIdle", "true or false");
  gpu.computeIdle = idle.is_boolean() && idle.get<bool>();
  const json& links = array(in, "nvlinks", path);
  std::set<unsigned> seenLinks;
  for (std::size_t i = 0; i < links.size(); ++i) {
    std::string at = path + ".nvlinks[" + std::to_string(i) + "]";
    auto link = optNumber<unsigned>(links[i], "link", at);
    if (!link || *link >= NVML_NVLINK_MAX_LINKS) malformed(at + ".link", "a link number below 18");
    if (!seenLinks.insert(*link).second) malformed(at + ".link", "each link once, not link " + std::to_string(*link) + " again");
    const json& active = member(links[i], "active");
    if (!active.is_boolean()) malformed(at + ".active", "true or false");
    gpu.links[*link] = {active.get<bool>(), optNumber<int>(links[i], "remoteType", at),
                        optString(links[i], "remoteBusId", at)};
  }
  const json& peers = array(in, "peers", path);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    std::string at = path + ".peers[" + std::to_string(i) + "]";
    auto other = optNumber<unsigned>(peers[i], "gpu", at);
    if (!other || *other >= count) malformed(at + ".gpu", "a GPU index below " + std::to_string(count));
    if (*other == self) malformed(at + ".gpu", "another GPU than this one (" + std::to_string(self) + ")");
    if (gpu.peers.contains(*other)) malformed(at + ".gpu", "each peer once, not GPU " + std::to_string(*other) + " again");
    RecordedPeer& peer = gpu.peers[*other];
    peer.commonAncestor = optNumber<int>(peers[i], "commonAncestor", at);
    const json& p2p = member(peers[i], "p2p");
    if (!p2p.is_null() && !p2p.is_object()) malformed(at + ".p2p", "an object");
    for (auto [caps, name] : kP2PCapsNames) {
      if (auto status = optNumber<int>(p2p, name, at + ".p2p")) peer.p2p[caps] = *status;
    }
  }
  gpu.fabric = readFabric(member(in, "fabric"), path + ".fabric");
  return gpu;
}

NvmlRecording readNvml(const json& in) {
  NvmlRecording out;
  if (!in.is_object()) malformed("nvml", "an object");
  const json& open = member(in, "open");
  if (!open.is_null()) {
    std::string kind = optString(open, "kind", "nvml.open").value_or("");
    auto message = optString(open, "message", "nvml.open");
    if (!message) malformed("nvml.open.message", "a string");
    for (auto [k, name] : kOpenKinds) {
      if (kind == name) out.openError = nvmlOpenError(k, *message);
    }
    if (!out.openError) malformed("nvml.open.kind", "notLoadable, initFailed or incomplete");
    return out;
  }
  out.driverVersion = optString(in, "driverVersion", "nvml");
  out.cudaDriverVersion = optNumber<int>(in, "cudaDriverVersion", "nvml");
  const json& count = member(in, "deviceCount");
  if (count.is_object()) {
    out.countError = optString(count, "error", "nvml.deviceCount");
    if (!out.countError) malformed("nvml.deviceCount.error", "a string");
    return out;
  }
  if (!count.is_number_integer() || !fits<unsigned>(count)) {
    malformed("nvml.deviceCount", "a number of GPUs, or {\"error\": …}");
  }
  const json& gpus = array(in, "gpus", "nvml");
  if (gpus.size() != count.get<std::size_t>()) {
    malformed("nvml.gpus", std::to_string(count.get<std::size_t>()) + " GPUs (deviceCount), not " +
                               std::to_string(gpus.size()));
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    out.gpus.push_back(readGpu(gpus[i], "nvml.gpus[" + std::to_string(i) + "]", static_cast<unsigned>(i),
                               static_cast<unsigned>(gpus.size())));
  }
  return out;
}

class RecordedNvml final : public Nvml {
 public:
  explicit RecordedNvml(std::shared_ptr<const NvmlRecording> recording) : r_(std::move(recording)) {}

  std::optional<std::string> driverVersion() const override { return r_->driverVersion; }
  std::optional<int> cudaDriverVersion() const override { return r_->cudaDriverVersion; }
  Result<unsigned> deviceCount() const override {
    if (r_->countError) return makeError(*r_->countError);
    return static_cast<unsigned>(r_->gpus.size());
  }
  Result<nvmlDevice_t> deviceByIndex(unsigned index) const override {
    if (index >= r_->gpus.size()) return makeError("NVML: GPU " + std::to_string(index) + ": Invalid Argument (2)");
    const RecordedGpu& gpu = r_->gpus[index];
    if (gpu.handleError) return makeError(*gpu.handleError);
    // The handle is the recorded GPU's address, as NVML's is its own device's.
    return reinterpret_cast<nvmlDevice_t>(const_cast<RecordedGpu*>(&gpu));
  }
  std::optional<std::string> uuid(nvmlDevice_t d) const override { return at(d, &RecordedGpu::uuid); }
  std::optional<std::string> name(nvmlDevice_t d) const override { return at(d, &RecordedGpu::name); }
  std::optional<std::string> pciBusId(nvmlDevice_t d) const override { return at(d, &RecordedGpu::pciBusId); }
  std::optional<uint64_t> memoryTotal(nvmlDevice_t d) const override { return at(d, &RecordedGpu::memoryTotal); }
  std::optional<unsigned> numaNode(nvmlDevice_t d) const override { return at(d, &RecordedGpu::numaNode); }
  std::optional<std::vector<unsigned long>> cpuAffinity(nvmlDevice_t d, unsigned words) const override {
    auto mask = at(d, &RecordedGpu::cpuAffinity);
    if (mask) mask->resize(words, 0);
    return mask;
  }
  bool computeIdle(nvmlDevice_t d) const override {
    const RecordedGpu* gpu = find(d);
    return gpu && gpu->computeIdle;
  }
  std::optional<int> commonAncestor(nvmlDevice_t a, nvmlDevice_t b) const override {
    const RecordedPeer* peer = pair(a, b);
    return peer ? peer->commonAncestor : std::nullopt;
  }
  int p2pStatus(nvmlDevice_t a, nvmlDevice_t b, int capsIndex) const override {
    const RecordedPeer* peer = pair(a, b);
    if (!peer || capsIndex < 0 || capsIndex >= static_cast<int>(peer->p2p.size())) return NVML_P2P_STATUS_UNKNOWN;
    return peer->p2p[capsIndex];
  }
  bool nvLinkActive(nvmlDevice_t d, unsigned link) const override {
    const RecordedLink* l = linkOf(d, link);
    return l && l->active;
  }
  std::optional<int> nvLinkRemoteType(nvmlDevice_t d, unsigned link) const override {
    const RecordedLink* l = linkOf(d, link);
    return l ? l->remoteType : std::nullopt;
  }
  std::optional<std::string> nvLinkRemoteBusId(nvmlDevice_t d, unsigned link) const override {
    const RecordedLink* l = linkOf(d, link);
    return l ? l->remoteBusId : std::nullopt;
  }
  std::optional<GpuFabricInfo> gpuFabricInfo(nvmlDevice_t d) const override { return at(d, &RecordedGpu::fabric); }

 private:
  const RecordedGpu* find(nvmlDevice_t device) const {
    for (const RecordedGpu& gpu : r_->gpus) {
      if (reinterpret_cast<const void*>(device) == &gpu) return &gpu;
    }
    return nullptr;
  }
  template <class T>
  T at(nvmlDevice_t device, T RecordedGpu::*field) const {
    const RecordedGpu* gpu = find(device);
    return gpu ? gpu->*field : T{};
  }
  const RecordedPeer* pair(nvmlDevice_t a, nvmlDevice_t b) const {
    const RecordedGpu* from = find(a);
    const RecordedGpu* to = find(b);
    if (!from || !to) return nullptr;
    auto it = from->peers.find(static_cast<unsigned>(to - r_->gpus.data()));
    return it == from->peers.end() ? nullptr : &it->second;
  }
  const RecordedLink* linkOf(nvmlDevice_t device, unsigned link) const {
    const RecordedGpu* gpu = find(device);
    return gpu && link < gpu->links.size() ? &gpu->links[link] : nullptr;
  }

  std::shared_ptr<const NvmlRecording> r_;
};

struct CudaRecording {
  std::optional<std::string> openError;
  std::vector<std::optional<std::string>> busIds;            // by ordinal; nothing where cuDeviceGet failed
  std::vector<std::vector<std::optional<bool>>> canAccessPeer;  // [device][peer]
};

CudaRecording readCuda(const json& in) {
  CudaRecording out;
  if (in.is_null()) {
    out.openError = "libcuda.so.1 not loadable";  // a recording of NVML alone
    return out;
  }
  if (!in.is_object()) malformed("cuda", "an object");
  const json& open = member(in, "open");
  if (!open.is_null()) {
    out.openError = optString(open, "message", "cuda.open");
    if (!out.openError) malformed("cuda.open.message", "a string");
    return out;
  }
  const json& devices = array(in, "devices", "cuda");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    std::string at = "cuda.devices[" + std::to_string(i) + "]";
    if (devices[i].is_null()) out.busIds.emplace_back();
    else if (auto busId = optString(devices[i], "busId", at)) out.busIds.emplace_back(*busId);
    else malformed(at + ".busId", "a string");
  }
  const json& access = array(in, "canAccessPeer", "cuda");
  if (!access.empty() && access.size() != devices.size()) {
    malformed("cuda.canAccessPeer", "one row per device (" + std::to_string(devices.size()) + ")");
  }
  for (std::size_t i = 0; i < access.size(); ++i) {
    std::string at = "cuda.canAccessPeer[" + std::to_string(i) + "]";
    if (!access[i].is_array() || access[i].size() != devices.size()) {
      malformed(at, "one answer per device (" + std::to_string(devices.size()) + "): true, false or null");
    }
    std::vector<std::optional<bool>> row;
    for (const json& can : access[i]) {
      if (!can.is_null() && !can.is_boolean()) malformed(at, "true, false or null for each device");
      row.push_back(can.is_boolean() ? std::optional<bool>(can.get<bool>()) : std::nullopt);
    }
    out.canAccessPeer.push_back(std::move(row));
  }
  return out;
}

class RecordedCuda final : public Cuda {
 public:
  explicit RecordedCuda(std::shared_ptr<const CudaRecording> recording) : r_(std::move(recording)) {}

  int deviceCount() const override { return static_cast<int>(r_->busIds.size()); }
  std::optional<Device> device(int ordinal) const override {
    if (ordinal < 0 || ordinal >= deviceCount() || !r_->busIds[ordinal]) return std::nullopt;
    return Device{ordinal, *r_->busIds[ordinal]};
  }
  std::optional<bool> canAccessPeer(CUdevice device, CUdevice peer) const override {
    if (device < 0 || peer < 0 || static_cast<std::size_t>(device) >= r_->canAccessPeer.size() ||
        static_cast<std::size_t>(peer) >= r_->canAccessPeer[device].size()) {
      return std::nullopt;
    }
    return r_->canAccessPeer[device][peer];
  }

 private:
  std::shared_ptr<const CudaRecording> r_;
};

std::map<std::string, std::string> readSysfs(const json& in) {
  std::map<std::string, std::string> files;
  if (in.is_null()) return files;
  if (!in.is_object()) malformed("sysfs", "an object of file paths and their text");
  for (const auto& [path, text] : in.items()) {
    if (!text.is_string()) malformed("sysfs." + path, "the file's text");
    files[path] = text.get<std::string>();
  }
  return files;
}

}  // namespace

json recordGpus(const GpuSources& sources) {
  json recording = json::object();
  recording["nvml"] = recordNvml(sources);
  recording["cuda"] = recordCuda(sources);
  recording["sysfs"] = recordSysfs(sources, recording["nvml"]);
  return recording;
}

Result<GpuSources> replayGpus(const json& recording) {
  std::shared_ptr<const NvmlRecording> nvml;
  std::shared_ptr<const CudaRecording> cuda;
  std::shared_ptr<const std::map<std::string, std::string>> sysfs;
  try {
    if (!recording.is_object()) malformed("the recording", "an object with nvml, cuda and sysfs");
    nvml = std::make_shared<const NvmlRecording>(readNvml(member(recording, "nvml")));
    cuda = std::make_shared<const CudaRecording>(readCuda(member(recording, "cuda")));
    sysfs = std::make_shared<const std::map<std::string, std::string>>(readSysfs(member(recording, "sysfs")));
  } catch (const Malformed& bad) {
    return makeError("GPU recording: " + bad.message);
  }
  GpuSources sources;
  sources.openNvml = [nvml]() -> Result<std::unique_ptr<Nvml>, NvmlOpenError> {
    if (nvml->openError) return *nvml->openError;
    return std::unique_ptr<Nvml>(std::make_unique<RecordedNvml>(nvml));
  };
  sources.openCuda = [cuda]() -> Result<std::unique_ptr<Cuda>> {
    if (cuda->openError) return makeError(*cuda->openError);
    return std::unique_ptr<Cuda>(std::make_unique<RecordedCuda>(cuda));
  };
  sources.measureBandwidth = [](Topology&) -> Result<void> {
    return makeError("bandwidth not measured: a recording holds no GPUs to copy between (measure it on the node)");
  };
  sources.readSysfs = [sysfs](const std::string& path) -> std::optional<std::string> {
    auto it = sysfs->find(path);
    if (it == sysfs->end()) return std::nullopt;
    return it->second;
  };
  return sources;
}

}  // namespace podshaper::agent
