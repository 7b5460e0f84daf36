#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace podshaper {

// What NCCL keeps in /dev/shm for each rank and each communicator (one per process
// group), by the transport its ranks use (docs/webhook.md "The NCCL reserve"; measured
// with NCCL 2.28 on x86-64). Config ncclShmPerCommunicator.
struct NcclShmCosts {
  // NET (every rank of a job that spans nodes): NCCL's proxy ops pool, 34,210,176 B,
  // a tmpfs takes 8,353 pages of it.
  int64_t net = 34213888;
  // P2P between the GPUs of one node, through cuMem (NCCL >= 2.19): nothing.
  int64_t p2p = 0;
  // SHM (P2P missing) with its buffers in /dev/shm: the pool and 4 segments of about 9.6 MB
  // (receive buffers of 9,637,888 B and their headers), 72,814,592 B measured on 2 ranks.
  int64_t shm = 72814592;
  bool operator==(const NcclShmCosts&) const = default;
};

// Whether the pod's ranks talk to ranks on other nodes, as the pod tells it.
struct JobSpan {
  enum Kind { kUnknown, kOneNode, kManyNodes } kind = kUnknown;
  std::string source;  // "PET_NNODES=1 in container \"trainer\"", or why unknown
  // The most nodes the job may span, where the pod says ("N", or MAX of "MIN:MAX").
  std::optional<uint64_t> nodes;
};

// torchrun's node count in one container: --standalone or --nnodes in its command and
// args (the flag wins, as in torchrun), else its env PET_NNODES ("N" or "MIN:MAX").
JobSpan readJobSpan(const nlohmann::json& container, const std::string& name);
// The pod's span over its GPU containers: many if any says so, one if all say one.
JobSpan combineJobSpans(const JobSpan& a, const JobSpan& b);

// The NCCL settings in a GPU container's env that change what NCCL keeps in /dev/shm
// (each empty, or where it was set, in words).
struct NcclEnv {
  std::string p2pOff;    // NCCL_P2P_DISABLE=1: the SHM transport between the pod's ranks
  std::string cuMemOff;  // NCCL_CUMEM_ENABLE=0: P2P over legacy CUDA IPC keeps the proxy pool
  std::string mnnvlOff;  // NCCL_MNNVL_ENABLE=0: no NVLink between nodes, the network instead
  // Why NCCL will not use a multi-node NVLink fabric (MNNVL needs cuMem and P2P), in words;
  // empty where it may.
  const std::string& mnnvlOffWhy() const;
};
NcclEnv readNcclEnv(const nlohmann::json& container, const std::string& name);
NcclEnv combineNcclEnvs(const NcclEnv& a, const NcclEnv& b);

struct NcclReserveInputs {
  uint64_t ranks = 1;
  uint64_t communicators = 0;
  std::string communicatorsFrom;  // "podshaper.io/nccl-communicators" or the config key
  JobSpan span;
  bool p2pAllPairs = false;  // the target nodes are validated with P2P between all GPU pairs
  NcclShmCosts costs;
  NcclEnv env;
  // The NVLink domain the job's ranks are all kept in, in words ("NVLink domain <d> (18
  // nodes)"); empty where they may leave it (no domain, preferred placement, a job larger
  // than a domain). docs/webhook.md "Multi-node NVLink".
  std::string nvlinkDomain;
};

// The transport a reserve is sized for; kNone: no NCCL, or no peer.
enum class NcclTransport { kNone, kNet, kShm, kP2P };
std::string_view toString(NcclTransport t);  // "NET", "SHM", "P2P", ""

struct NcclReserve {
  uint64_t communicators = 0;
  std::string communicatorsFrom;
  uint64_t perCommunicatorBytes = 0;  // per rank
  NcclTransport transport = NcclTransport::kNone;
  std::string why;                    // the transport and why, for the formula
};

// The transport NCCL will use, of those the ranks may use the one that costs most.
NcclReserve planNcclReserve(const NcclReserveInputs& in);

}  // namespace podshaper
