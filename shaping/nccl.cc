#include "shaping/nccl.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "api/names.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"

namespace podshaper {
namespace {

using json = nlohmann::json;


// What one command word may grow to by $(NAME) expansion: a node count is a few bytes, and
// a word of many $(BIG) must not cost the webhook its memory.
constexpr std::size_t kMaxExpandedWord = 1024;

// An env entry's value; nullptr when it is set through valueFrom.
const std::string* valueOf(const json& entry) {
  const json& value = member(entry, "value");
  return value.is_string() ? &value.get_ref<const std::string&>() : nullptr;
}

// A container's env as the kubelet sets it, read where it lies in the pod: the last entry
// of a name wins; nullptr for a value set through valueFrom. A pod's few lookups scan an
// ordinary env (no copy); a long one is indexed once, so that args of many $(NAME) over
// an env of many entries cost no more than reading them.
class EnvValues {
 public:
  explicit EnvValues(const json& container) : env_(member(container, "env")) {
    if (!env_.is_array() || env_.size() <= kScanUpTo) return;
    for (const json& e : env_) {  // in order: a later entry of a name replaces an earlier one
      const json& entryName = member(e, "name");
      if (entryName.is_string()) index_[entryName.get_ref<const std::string&>()] = valueOf(e);
    }
  }

  // nullopt when the name is not set.
  std::optional<const std::string*> find(std::string_view name) const {
    if (!env_.is_array()) return std::nullopt;
    if (env_.size() > kScanUpTo) {
      auto it = index_.find(name);
      if (it == index_.end()) return std::nullopt;
      return it->second;
    }
    for (auto e = env_.rbegin(); e != env_.rend(); ++e) {
      const json& entryName = member(*e, "name");
      if (entryName.is_string() && entryName.get_ref<const std::string&>() == name) return valueOf(*e);
    }
    return std::nullopt;
  }

 private:
  static constexpr std::size_t kScanUpTo = 64;

  const json& env_;
  std::map<std::string_view, const std::string*, std::less<>> index_;
};

// Kubernetes expands $(NAME) in command and args from the container's env.
std::string expand(std::string word, const EnvValues& env) {
  for (std::size_t at = word.find("$("); at != std::string::npos; at = word.find("$(", at)) {
    std::size_t close = word.find(')', at);
    if (close == std::string::npos) break;
    auto found = env.find(std::string_view(word).substr(at + 2, close - at - 2));
    if (!found || !*found) {
      at = close;
      continue;
    }
    const std::string& value = **found;
    if (word.size() - (close - at + 1) + value.size() > kMaxExpandedWord) break;
    word.replace(at, close - at + 1, value);
    at += value.size();
  }
  return word;
}

// torchrun's node count: "N", or "MIN:MAX" (MIN <= MAX), whose maximum says how many nodes
// the job may span.
JobSpan spanOf(const std::string& value, const std::string& where) {
  const std::size_t colon = value.find(':');
  auto most = parseCount(colon == std::string::npos ? value : value.substr(colon + 1));
  auto least = colon == std::string::npos ? most : parseCount(value.substr(0, colon));
  if (!most || !least || *least == 0 || *least > *most) return {JobSpan::kUnknown, where + " is not a node count", {}};
  return {*most == 1 ? JobSpan::kOneNode : JobSpan::kManyNodes, where, *most};
}

// The words of the container's command and args: a list, or a shell line in one string.
std::vector<std::string> words(const json& container, const EnvValues& env) {
  std::vector<std::string> out;
  for (const char* field : {"command", "args"}) {
    auto it = container.find(field);
    if (it == container.end() || !it->is_array()) continue;
    for (const json& item : *it) {
      if (!item.is_string()) continue;
      // Split at white space, as a shell line's words (the C locale's isspace).
      const std::string& line = item.get_ref<const std::string&>();
      constexpr std::string_view kSpace = " \t\n\v\f\r";
      for (std::size_t at = line.find_first_not_of(kSpace); at != std::string::npos;) {
        const std::size_t end = std::min(line.find_first_of(kSpace, at), line.size());
        out.push_back(expand(line.substr(at, end - at), env));
        at = line.find_first_not_of(kSpace, end);
      }
    }
  }
  return out;
}

}  // namespace

JobSpan readJobSpan(const json& container, const std::string& name) {
  if (!container.is_object()) return {JobSpan::kUnknown, "container " + inQuotes(name) + " is malformed", {}};
  const std::string in = " in container " + inQuotes(name);
  const EnvValues env(container);
  const std::vector<std::string> w = words(container, env);
  const std::string flag(names::kNnodesFlag);
  // Every torchrun the container starts counts: a job across nodes anywhere wins.
  std::optional<JobSpan> fromFlags;
  auto add = [&](JobSpan span) { fromFlags = fromFlags ? combineJobSpans(*fromFlags, span) : span; };
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i] == names::kStandaloneFlag) add({JobSpan::kOneNode, "torchrun " + w[i] + in, {}});
    if (w[i].starts_with(flag + "=")) add(spanOf(w[i].substr(flag.size() + 1), "torchrun " + cutUtf8(w[i], 64) + in));
    if (w[i] == flag && i + 1 < w.size()) {
      add(spanOf(w[i + 1], "torchrun " + flag + " " + cutUtf8(w[i + 1], 64) + in));
    }
  }
  if (fromFlags) return *fromFlags;  // the flag wins over the environment, as in torchrun
  auto nnodes = env.find(names::kNnodesEnv);
  if (!nnodes) return {JobSpan::kUnknown, "no torchrun --nnodes or " + std::string(names::kNnodesEnv) + in, {}};
  if (!*nnodes) return {JobSpan::kUnknown, std::string(names::kNnodesEnv) + " from valueFrom" + in, {}};
  return spanOf(**nnodes, std::string(names::kNnodesEnv) + "=" + cutUtf8(**nnodes, 64) + in);
}

NcclEnv readNcclEnv(const json& container, const std::string& name) {
  NcclEnv out;
  const json& env = member(container, "env");
  if (!env.is_array()) return out;
  // One pass for both names; the last entry of a name wins (nullptr: set through valueFrom).
  std::optional<const std::string*> p2p, cuMem, mnnvl;
  for (const json& e : env) {
    const json& entryName = member(e, "name");
    if (!entryName.is_string()) continue;
    const std::string& n = entryName.get_ref<const std::string&>();
    if (n == names::kNcclP2PDisableEnv) p2p = valueOf(e);
    else if (n == names::kNcclCuMemEnableEnv) cuMem = valueOf(e);
    else if (n == names::kNcclMnnvlEnableEnv) mnnvl = valueOf(e);
  }
  auto is = [](const std::optional<const std::string*>& found, std::string_view value) {
    return found && *found && **found == value;
  };
  if (is(p2p, "1")) out.p2pOff = std::string(names::kNcclP2PDisableEnv) + "=1 in container " + inQuotes(name);
  if (is(cuMem, "0")) out.cuMemOff = std::string(names::kNcclCuMemEnableEnv) + "=0 in container " + inQuotes(name);
  if (is(mnnvl, "0")) out.mnnvlOff = std::string(names::kNcclMnnvlEnableEnv) + "=0 in container " + inQuotes(name);
  return out;
}

NcclEnv combineNcclEnvs(const NcclEnv& a, const NcclEnv& b) {
  auto first = [](const std::string& x, const std::string& y) { return x.empty() ? y : x; };
  return {first(a.p2pOff, b.p2pOff), first(a.cuMemOff, b.cuMemOff), first(a.mnnvlOff, b.mnnvlOff)};
}

// NCCL's ncclMnnvlCheck (src/mnnvl.cc) returns before it looks at the fabric without
// cuMem, and MNNVL's connections are its P2P transport's.
const std::string& NcclEnv::mnnvlOffWhy() const {
  if (!mnnvlOff.empty()) return mnnvlOff;
  if (!p2pOff.empty()) return p2pOff;
  return cuMemOff;
}

JobSpan combineJobSpans(const JobSpan& a, const JobSpan& b) {
  if (a.kind == JobSpan::kManyNodes && b.kind == JobSpan::kManyNodes && b.nodes > a.nodes) {
    JobSpan out = a;  // the first one's words, the larger count
    out.nodes = b.nodes;
    return out;
  }
  if (a.kind == JobSpan::kManyNodes) return a;
  if (b.kind == JobSpan::kManyNodes) return b;
  if (a.kind == JobSpan::kUnknown) return a;
  return b;
}

std::string_view toString(NcclTransport t) {
  switch (t) {
    case NcclTransport::kNet: return "NET";
    case NcclTransport::kShm: return "SHM";
    case NcclTransport::kP2P: return "P2P";
    case NcclTransport::kNone: break;
  }
  return "";
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
    NcclTransport transport;
    int64_t bytes;
    std::string why;
  };
  std::vector<Option> options;
  if (!oneNode && !in.nvlinkDomain.empty() && in.env.mnnvlOffWhy().empty()) {
    options.push_back({NcclTransport::kP2P, in.costs.p2p,
                       "NCCL's P2P transport over the NVLink fabric (cuMem fabric handles through the IMEX channel) "
                       "between the job's ranks, all kept within " + in.nvlinkDomain +
                           ", and no network proxy pool: config ncclShmPerCommunicator.p2p"});
  } else if (!oneNode) {
    options.push_back(
        {NcclTransport::kNet, in.costs.net,
         (in.span.kind == JobSpan::kManyNodes ? "the job spans nodes (" + in.span.source + ")"
                                              : "the job may span nodes (" + in.span.source +
                                                    "; set torchrun --nnodes or " + std::string(names::kNnodesEnv) +
                                                    " to 1 for a one-node job)") +
             ", and NCCL's proxy keeps a pool per rank per communicator for its network connections: config "
             "ncclShmPerCommunicator.net"});
  }
  const bool p2p = in.p2pAllPairs && in.env.p2pOff.empty();
  if (in.ranks > 1 && !p2p) {
    options.push_back(
        {NcclTransport::kShm, in.costs.shm,
         (!in.env.p2pOff.empty() ? in.env.p2pOff + " turns P2P off"
                                 : std::string("P2P between all GPU pairs is not known to hold on the nodes the pod may "
                                               "land on")) +
             ", so NCCL may use its SHM transport between the pod's ranks, with its proxy pool and receive buffers "
             "in /dev/shm (sized as if its cuMem host memory were refused, as a RuntimeDefault seccomp profile "
             "refuses it): config ncclShmPerCommunicator.shm"});
  }
  if (in.ranks > 1 && p2p && !in.env.cuMemOff.empty()) {
    options.push_back({NcclTransport::kP2P, std::max(in.costs.p2p, in.costs.net),
                       "the pod's ranks read each other's GPUs directly, but " + in.env.cuMemOff +
                           " makes NCCL use legacy CUDA IPC, which keeps its proxy pool per rank per communicator: "
                           "config ncclShmPerCommunicator.net"});
  } else if (in.ranks > 1 && p2p) {
    options.push_back({NcclTransport::kP2P, in.costs.p2p,
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
  r.why = std::string(toString(r.transport)) + (oneNode ? " on one node (" + in.span.source + "): " : ": ") + most->why;
  return r;
}

}  // namespace podshaper
