#include "judging/shm_exhausted.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string_view>

#include "api/names.h"
#include "api/shm_volume.h"
#include "base/checked.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"
#include "base/timefmt.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

}  // namespace

const char* toString(ShmCause cause) {
  switch (cause) {
    case ShmCause::kDataLoader: return "dataloader";
    case ShmCause::kNccl: return "nccl";
    case ShmCause::kSigbus: return "sigbus";
  }
  return "sigbus";
}

namespace {

bool containsNoCase(std::string_view hay, std::string_view needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         }) != hay.end();
}

// The first line of `message` for which `test` holds, trimmed to 200 bytes.
template <typename Test>
std::optional<std::string> lineWhere(const std::string& message, Test test) {
  std::size_t start = 0;
  while (start <= message.size()) {
    std::size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    std::string line = message.substr(start, end - start);
    if (test(line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      // A log line goes into an Event: no terminal control sequences.
      for (char& ch : line) {
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
      }
      return cutUtf8(std::move(line), 200);
    }
    start = end + 1;
  }
  return std::nullopt;
}

bool ncclLine(const std::string& l) {
  return containsNoCase(l, "Error while creating shared memory segment") ||
         (containsNoCase(l, "/dev/shm/nccl-") && containsNoCase(l, "No space left on device"));
}

bool dataLoaderLine(const std::string& l) {
  return containsNoCase(l, "insufficient shared memory") || containsNoCase(l, "out of shared memory") ||
         containsNoCase(l, "is killed by signal: Bus error") || containsNoCase(l, "bus error encountered in worker") ||
         (containsNoCase(l, "/torch_") && containsNoCase(l, "No space left on device"));
}

// What the training process says when it sees a worker gone, before (or without) the
// worker's own bus error line, which the log's 2 KiB tail may no longer hold.
bool workerGoneLine(const std::string& l) {
  return containsNoCase(l, "DataLoader worker (pid") && containsNoCase(l, "exited unexpectedly");
}

// A worker that died of something else: killed by another signal (Killed: the OOM killer
// at the memory limit; Segmentation fault, Aborted), or exited with a code (an exception).
bool otherWorkerDeath(const std::string& l) {
  return (containsNoCase(l, "is killed by signal:") && !containsNoCase(l, "Bus error")) ||
         containsNoCase(l, "exited unexpectedly with exit code");
}

// torchrun's line when a rank died of SIGBUS ("Signal 7 (SIGBUS) received by PID 42");
// the container itself then exits 1.
bool sigbusLine(const std::string& l) { return containsNoCase(l, "(SIGBUS)"); }

struct Cause {
  ShmCause cause;
  std::optional<std::string> line;
};

std::optional<Cause> classify(const json& terminated) {
  const json& code = member(terminated, "exitCode");
  const json& signal = member(terminated, "signal");
  const std::string message = stringMember(terminated, "message");
  if (auto l = lineWhere(message, ncclLine)) return Cause{ShmCause::kNccl, l};
  if (auto l = lineWhere(message, dataLoaderLine)) return Cause{ShmCause::kDataLoader, l};
  if (!lineWhere(message, otherWorkerDeath)) {
    if (auto l = lineWhere(message, workerGoneLine)) return Cause{ShmCause::kDataLoader, l};
  }
  if ((code.is_number_integer() && code.get<long long>() == 135) ||
      (signal.is_number_integer() && signal.get<long long>() == 7)) {
    return Cause{ShmCause::kSigbus, std::nullopt};
  }
  if (auto l = lineWhere(message, sigbusLine)) return Cause{ShmCause::kSigbus, l};
  return std::nullopt;
}

// The largest byte count a ShmUsage may say: an int64's, in whole Mi (so that its text,
// rounded up to Mi, is an int64's too).
constexpr uint64_t kMaxMeasuredBytes = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / kMiB * kMiB;

// A non-negative integer up to `max`, else unset.
std::optional<uint64_t> countUpTo(const json& value, uint64_t max) {
  uint64_t n = 0;
  if (value.is_number_unsigned()) {
    n = value.get<uint64_t>();
  } else if (value.is_number_integer() && value.get<long long>() >= 0) {
    n = static_cast<uint64_t>(value.get<long long>());
  } else {
    return std::nullopt;
  }
  if (n > max) return std::nullopt;
  return n;
}

// Bytes as the Events write a /dev/shm size: rounded up to Mi ("161Mi", "1Gi").
std::string miText(uint64_t bytes) { return formatBytes(static_cast<int64_t>(ceilMiB(bytes) * kMiB)); }

// part of whole in whole percent, rounded down (whole > 0).
uint64_t percentOf(uint64_t part, uint64_t whole) {
  __extension__ typedef unsigned __int128 u128;
  return static_cast<uint64_t>(static_cast<u128>(part) * 100 / whole);
}

// The run of the ShmUsage that died, where it has it. One that ended now (`previous`
// false) is its last run. One before the container's current run (`previous`) is the run
// before the last where the current run is there already: open while the container runs,
// or ended too; else (podshaper-shm has not written the current run yet) the last.
const ShmRunMeasured* deadRun(const ShmMeasured& measured, const json& containerStatus, bool previous) {
  const std::vector<ShmRunMeasured>& runs = measured.runs;
  if (runs.empty()) return nullptr;
  const json& state = member(containerStatus, "state");
  const bool currentThere =
      member(state, "terminated").is_object() || (member(state, "running").is_object() && !runs.back().ended);
  if (!previous || !currentThere) return &runs.back();
  return runs.size() >= 2 ? &runs[runs.size() - 2] : nullptr;
}

// What podshaper-shm says of a run, for the Event.
std::string measuredWords(const ShmRunMeasured& run) {
  std::string m =
      " podshaper-shm measured run " + std::to_string(run.run) + " on the node: peak " + miText(run.peakBytes);
  if (run.sizeBytes > 0) {
    m += " of " + miText(run.sizeBytes) + " (" + std::to_string(percentOf(run.peakBytes, run.sizeBytes)) + "%)";
  }
  return m + ".";
}

// What podshaper-shm measured of the container's /dev/shm: its ShmUsage, where it is of
// that volume.
struct Measured {
  const ShmMeasured* usage = nullptr;
  const ShmRunMeasured* died = nullptr;  // the run that died, where the ShmUsage has it
};

// `volume`: the container's /dev/shm as the pod has it (the operator keeps the mounts and
// volumes at /dev/shm): a volume of the user's, else podshaper's of shm-size.
std::string shmFailureMessage(const json& pod, const std::string& container, const std::optional<ShmVolumeInfo>& volume,
                              const Cause& c, bool restarted, long long run, const Measured& measured) {
  const bool users = volume && !volume->isPodshapers();
  const std::string size =
      users ? volume->sizeAnnotation().value_or("") : annotation(pod, names::kShmSize).value_or("");
  const std::string formula = annotation(pod, names::kShmFormula).value_or("");
  std::string m = "Container \"" + container + "\" ran out of /dev/shm: ";
  switch (c.cause) {
    case ShmCause::kDataLoader: m += "a PyTorch DataLoader worker could not put its batch there"; break;
    case ShmCause::kNccl: m += "NCCL could not make its shared memory segment there"; break;
    case ShmCause::kSigbus:
      m += std::string(c.line ? "one of its processes was killed by SIGBUS" : "it was killed by SIGBUS (exit code 135)") +
           ", which in a training pod is most often a write into a full /dev/shm";
      break;
  }
  if (c.line) m += " (\"" + *c.line + "\")";
  m += ". ";
  if (users) {
    m += "/dev/shm is the pod's own " + volume->words() + ", not podshaper's.";
  } else {
    m += size.empty() ? std::string("Its /dev/shm size is not recorded.")
                      : "/dev/shm was " + size + ", sized by podshaper for what the pod's annotations say.";
  }
  if (measured.died) m += measuredWords(*measured.died);
  const std::string dataLoaderAdvice = " set the pod's annotations " + std::string(names::kWorkers) + ", " +
                                       std::string(names::kPrefetchFactor) + " and " + std::string(names::kBatchBytes) + " (or " +
                                       std::string(names::kBatchShape) + " and " + std::string(names::kBatchDtype) +
                                       ") to what its DataLoader runs";
  const std::string ncclAdvice = " set the pod's annotation " + std::string(names::kNcclCommunicators) +
                                 " to the NCCL communicators the job makes (one per process group)";
  if (users) {
    switch (volume->kind) {
      case ShmVolumeInfo::Kind::kMemory:
      case ShmVolumeInfo::Kind::kDisk:
        m += volume->sizeLimit
                 ? " Raise the volume's sizeLimit (and the container's memory for it) to at least what the pod needs,"
                 : " The volume has no sizeLimit: its pages count against the container's memory limit; give it a "
                   "sizeLimit of at least what the pod needs and the container the memory for it,";
        break;
      case ShmVolumeInfo::Kind::kHostPath:
        m += " The host's /dev/shm is shared with every pod on the node and keeps what they and earlier runs left: "
             "free it,";
        break;
      case ShmVolumeInfo::Kind::kOther:
      case ShmVolumeInfo::Kind::kMissing:
        m += " Give the volume room for at least what the pod needs,";
        break;
    }
    m += " or drop the container's /dev/shm mount so that podshaper mounts one of that size.";
  }
  switch (c.cause) {
    case ShmCause::kDataLoader:
      m += " The DataLoader holds more than podshaper was told:" + dataLoaderAdvice + ".";
      break;
    case ShmCause::kNccl:
      m += " NCCL keeps more there than podshaper's NCCL reserve counts:" + ncclAdvice + ".";
      break;
    case ShmCause::kSigbus:
      m += " Either the DataLoader holds more than podshaper was told (" + dataLoaderAdvice.substr(1) +
           ") or NCCL keeps more than its reserve (" + ncclAdvice.substr(1) + ").";
      break;
  }
  // podshaper-shm watches the pod and, unless an admin turned it off, clears podshaper's volume
  // of what a dead run left.
  const bool cleared = measured.usage && !users && !measured.usage->userVolume;
  if (restarted && cleared) {
    m += " This was run " + std::to_string(run + 1) +
         " of the container in this pod; podshaper-shm clears what a dead run left in podshaper's /dev/shm before the "
         "container starts again, unless its cleaning is off (its ShmLeftoversRemoved Event says what it removed).";
  } else if (restarted) {
    const bool host = users && volume->kind == ShmVolumeInfo::Kind::kHostPath;
    m += " This was run " + std::to_string(run + 1) + " of the container in this pod: /dev/shm is " +
         (host ? "the host's" : "the pod's emptyDir") +
         " and keeps what earlier runs left (a crashed NCCL's segments, a DataLoader's files), so this run started "
         "with less than " + (size.empty() ? std::string("its size") : size) +
         ": let the pod be replaced rather than restarted in place (restartPolicy: Never; a Job's backoffLimit " +
         "makes a new pod).";
  }
  if (!formula.empty()) m += " The size: " + formula + ".";
  return m;
}

// The kubelet's cut of a log into a termination message (FallbackToLogsOnError): the last
// 80 lines, at most 2048 bytes. A message near either was likely cut.
constexpr std::size_t kMessageBytes = 2048, kMessageLines = 80;

bool wasCut(const std::string& message) {
  return message.size() + 64 >= kMessageBytes ||
         static_cast<std::size_t>(std::count(message.begin(), message.end(), '\n')) + 1 >= kMessageLines;
}

// Each run that ended with an error, now (its index is the restart count) or the one
// before, with its container's status.
template <typename Visit>
void forEachEndedRun(const json& pod, Visit visit) {
  const json& status = member(pod, "status");
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    for (const json& cs : member(status, list)) {
      const long long restarts =
          member(cs, "restartCount").is_number_integer() ? member(cs, "restartCount").get<long long>() : 0;
      for (const auto& [state, run] : {std::pair<const char*, long long>{"state", restarts},
                                       std::pair<const char*, long long>{"lastState", restarts - 1}}) {
        const json& terminated = member(member(cs, state), "terminated");
        if (!terminated.is_object() || run < 0) continue;
        const json& code = member(terminated, "exitCode");
        if (code.is_number_integer() && code.get<long long>() == 0) continue;
        visit(stringMember(cs, "name"), terminated, run, std::string_view(state) == "lastState", cs);
      }
    }
  }
}

std::string runKey(const json& pod, const std::string& container, long long run) {
  return stringMember(member(pod, "metadata"), "uid") + "/" + container + "/" + std::to_string(run);
}

}  // namespace

std::vector<LogToRead> logsToRead(const json& pod) {
  std::vector<LogToRead> out;
  forEachEndedRun(pod, [&](const std::string& name, const json& terminated, long long run, bool previous,
                           const json&) {
    // The OOM killer's and the kubelet's own ends say what they are; a message the
    // container wrote itself is short.
    if (stringMember(terminated, "reason") != "Error" || classify(terminated)) return;
    if (!wasCut(stringMember(terminated, "message"))) return;
    out.push_back(LogToRead{name, previous, runKey(pod, name, run)});
  });
  return out;
}

// What shmEvidence keeps at most: enough for every line judgeTerminations may quote.
constexpr std::size_t kEvidenceBytes = 8192;

std::string shmEvidence(const std::string& log) {
  std::string kept;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    if (ncclLine(line) || dataLoaderLine(line) || workerGoneLine(line) || otherWorkerDeath(line) || sigbusLine(line)) {
      if (kept.size() + line.size() >= kEvidenceBytes) break;
      kept += line;
      kept += '\n';
    }
    start = end + 1;
  }
  return kept;
}

std::optional<ShmMeasured> shmMeasured(const json& shmUsage, const json& pod) {
  const json& spec = member(shmUsage, "spec");
  const std::string uid = stringMember(member(pod, "metadata"), "uid");
  if (uid.empty() || !hasText(member(spec, "podUID"), uid)) return std::nullopt;
  // Written on the pod's node, or not its own (a node's podshaper-shm writes only its pods').
  const std::string node = stringMember(member(pod, "spec"), "nodeName");
  if (!node.empty() && !hasText(member(spec, "nodeName"), node)) return std::nullopt;
  const json& volume = member(spec, "volume");
  const json& userVolume = member(spec, "userVolume");
  if (!volume.is_string() || !(userVolume.is_boolean() || userVolume.is_null())) return std::nullopt;
  ShmMeasured measured{volume.get<std::string>(), userVolume.is_boolean() && userVolume.get<bool>(), {}};
  // A ShmUsage just made has no status yet, and no runs before its pod's first.
  const json& status = member(shmUsage, "status");
  const json& runs = member(status, "runs");
  if (!(status.is_object() || status.is_null()) || !(runs.is_array() || runs.is_null())) return std::nullopt;
  for (const json& r : runs) {
    const auto number = countUpTo(member(r, "run"), std::numeric_limits<long long>::max());
    const auto size = countUpTo(member(r, "sizeBytes"), kMaxMeasuredBytes);
    const auto peak = countUpTo(member(r, "peakBytes"), kMaxMeasuredBytes);
    const json& endedAt = member(r, "endedAt");
    if (!number || *number == 0 || !size || !peak || !(endedAt.is_string() || endedAt.is_null())) return std::nullopt;
    const bool ended = endedAt.is_string() && !endedAt.get_ref<const std::string&>().empty();
    const std::optional<long long> at = ended ? parseTime(endedAt.get_ref<const std::string&>()) : 0;
    if (!at) return std::nullopt;
    measured.runs.push_back({static_cast<long long>(*number), *size, *peak, ended, *at});
  }
  return measured;
}

std::vector<ShmFailure> judgeTerminations(const json& pod, const std::map<std::string, std::string>& logs,
                                          const json* shmUsage) {
  std::vector<ShmFailure> out;
  const std::string uid = stringMember(member(pod, "metadata"), "uid");
  const std::optional<ShmMeasured> usage = shmUsage ? shmMeasured(*shmUsage, pod) : std::nullopt;
  forEachEndedRun(pod, [&](const std::string& name, const json& terminated, long long run, bool previous,
                           const json& containerStatus) {
    auto cause = classify(terminated);
    if (!cause) {
      auto log = logs.find(runKey(pod, name, run));
      if (log == logs.end()) return;
      json withLog = terminated;
      withLog["message"] = log->second;
      cause = classify(withLog);
      if (!cause) return;
    }
    ShmFailure f;
    f.container = name;
    f.cause = cause->cause;
    f.restarted = run >= 1;
    f.key = uid + "/" + name + "/" + (f.restarted ? "restarted" : "first") + "/" + toString(f.cause);
    f.finishedAt = parseTime(stringMember(terminated, "finishedAt")).value_or(0);
    Measured measured;
    const std::optional<ShmVolumeInfo> volume = containerShmVolume(pod, name);
    if (usage && volume && volume->name == usage->volume) {
      measured = {&*usage, deadRun(*usage, containerStatus, previous)};
    }
    f.event = EventSpec{"Warning", reasons::kShmExhausted,
                        shmFailureMessage(pod, name, volume, *cause, f.restarted, run, measured)};
    if (std::none_of(out.begin(), out.end(), [&](const ShmFailure& o) { return o.key == f.key; })) {
      out.push_back(std::move(f));
    }
  });
  return out;
}

std::optional<ObjectRef> controllerOf(const json& pod) {
  for (const json& ref : member(member(pod, "metadata"), "ownerReferences")) {
    if (member(ref, "controller") != true) continue;
    return ObjectRef{stringMember(ref, "apiVersion"), stringMember(ref, "kind"), stringMember(ref, "name"),
                     stringMember(ref, "uid"), stringMember(member(pod, "metadata"), "namespace")};
  }
  return std::nullopt;
}

EventSpec ownerEvent(const json& pod, const ShmFailure& failure) {
  const json& meta = member(pod, "metadata");
  EventSpec e = failure.event;
  e.message = "Pod " + stringMember(meta, "namespace") + "/" + stringMember(meta, "name") + ": " + e.message;
  return e;
}

}  // namespace podshaper
