#include "shaping/nccl.h"

#include <sstream>
#include <vector>

#include "api/names.h"
#include "base/quantity.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// torchrun's --nnodes: "N" or "MIN:MAX"; its maximum says how many nodes the job may span.
JobSpan spanOf(const std::string& value, const std::string& where) {
  std::string most = value.substr(value.find(':') == std::string::npos ? 0 : value.find(':') + 1);
  auto n = parseCount(most);
  if (!n || *n == 0) return {JobSpan::kUnknown, where + " is not a node count"};
  return {*n == 1 ? JobSpan::kOneNode : JobSpan::kManyNodes, where};
}

// The words of the container's command and args: a list, or a shell line in one string.
std::vector<std::string> words(const json& container) {
  std::vector<std::string> out;
  for (const char* field : {"command", "args"}) {
    auto it = container.find(field);
    if (it == container.end() || !it->is_array()) continue;
    for (const json& item : *it) {
      if (!item.is_string()) continue;
      std::istringstream line(item.get<std::string>());
      for (std::string w; line >> w;) out.push_back(w);
    }
  }
  return out;
}

}  // namespace

JobSpan readJobSpan(const json& container, const std::string& name) {
  if (!container.is_object()) return {JobSpan::kUnknown, "container " + quoted(name) + " is malformed"};
  const std::string in = " in container " + quoted(name);
  const std::vector<std::string> w = words(container);
  const std::string flag(names::kNnodesFlag);
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i] == names::kStandaloneFlag) return {JobSpan::kOneNode, "torchrun " + w[i] + in};
    if (w[i].starts_with(flag + "=")) return spanOf(w[i].substr(flag.size() + 1), "torchrun " + w[i] + in);
    if (w[i] == flag && i + 1 < w.size()) return spanOf(w[i + 1], "torchrun " + flag + " " + w[i + 1] + in);
  }
  auto env = container.find("env");
  if (env != container.end() && env->is_array()) {
    for (const json& e : *env) {
      if (!e.is_object() || e.value("name", std::string()) != names::kNnodesEnv) continue;
      auto value = e.find("value");
      if (value == e.end() || !value->is_string()) {
        return {JobSpan::kUnknown, std::string(names::kNnodesEnv) + " from valueFrom" + in};
      }
      return spanOf(value->get<std::string>(), std::string(names::kNnodesEnv) + "=" + value->get<std::string>() + in);
    }
  }
  return {JobSpan::kUnknown, "no torchrun --nnodes or " + std::string(names::kNnodesEnv) + in};
}

JobSpan combineJobSpans(const JobSpan& a, const JobSpan& b) {
  if (a.kind == JobSpan::kManyNodes) return a;
  if (b.kind == JobSpan::kManyNodes) return b;
  if (a.kind == JobSpan::kUnknown) return a;
  return b;
}

NcclReserve planNcclReserve(const NcclReserveInputs& in) {
  NcclReserve r;
  r.communicators = in.communicators;
  r.communicatorsFrom = in.communicatorsFrom;
  if (in.communicators == 0) {
    r.why = in.communicatorsFrom + " is 0: the pod runs no NCCL";
    return r;
  }
  const bool oneNode = in.span.kind == JobSpan::kOneNode;
  if (oneNode && in.ranks <= 1) {
    r.why = "one rank on one node (" + in.span.source + "): NCCL connects to no peer";
    return r;
  }
  // The transports the ranks may use, and which of them costs most: a rank's proxy pool
  // is one per communicator whichever transports need it, so the costs do not add up.
  struct Option {
    const char* transport;
    int64_t bytes;
    std::string why;
  };
  std::vector<Option> options;
  if (!oneNode) {
    options.push_back(
        {"NET", in.costs.net,
         (in.span.kind == JobSpan::kManyNodes ? "the job spans nodes (" + in.span.source + ")"
                                              : "the job may span nodes (" + in.span.source +
                                                    "; set torchrun --nnodes or " + std::string(names::kNnodesEnv) +
                                                    " to 1 for a one-node job)") +
             ", and NCCL's proxy keeps a pool per rank per communicator for its network connections: config "
             "ncclShmPerCommunicator.net"});
  }
  if (in.ranks > 1 && !in.p2pAllPairs) {
    options.push_back({"SHM", in.costs.shm,
                       "P2P between all GPU pairs is not validated on the target nodes, so NCCL may use its SHM "
                       "transport between the pod's ranks, with its proxy pool and receive buffers in /dev/shm: "
                       "config ncclShmPerCommunicator.shm"});
  }
  if (in.ranks > 1 && in.p2pAllPairs) {
    options.push_back({"P2P", in.costs.p2p,
                       "the pod's ranks read each other's GPUs directly (target nodes validated with P2P between "
                       "all GPU pairs), and NCCL's P2P over cuMem keeps nothing in /dev/shm: config "
                       "ncclShmPerCommunicator.p2p"});
  }
  const Option* most = &options.front();
  for (const Option& o : options) {
    if (o.bytes > most->bytes) most = &o;
  }
  r.transport = most->transport;
  r.perCommunicatorBytes = static_cast<uint64_t>(most->bytes);
  r.why = r.transport + (oneNode ? " on one node (" + in.span.source + "): " : ": ") + most->why;
  return r;
}

}  // namespace podshaper
