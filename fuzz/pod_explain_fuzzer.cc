// A shaped pod as the operator's cache holds it (judging/pending.h,
// judging/shm_exhausted.h): the pod's spec, status and termination messages come from
// users and their containers' logs.
//   judgePending: never throws; a NotPlaceable Event is a Warning whose message starts
//   "Pending for " and whose answer is the message after its first ": "; look again
//   within a day.
//   judgeTerminations (with the logs logsToRead asks for, keyed by the pod's uid): each
//   failure is a ShmExhausted Warning on a container the pod lists, keyed by the pod's
//   uid; quoted log lines are at most 200 bytes and hold no control character.
//   Every message, as an Event, serialises as JSON (valid UTF-8 in, valid UTF-8 out).

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "base/json_util.h"
#include "fuzz/fuzz_check.h"
#include "judging/events.h"
#include "judging/pending.h"
#include "judging/shm_exhausted.h"

using nlohmann::json;
using namespace podshaper;

namespace {

// Nodes of the kinds NotPlaceable groups: validated, not, not judged, cordoned, tainted,
// holding a node-exclusive pod.
std::vector<NodeFacts> someNodes() {
  std::vector<NodeFacts> nodes;
  auto add = [&](const char* name, int gpus, const char* validated, const char* memlock) {
    NodeFacts f;
    f.node.name = name;
    f.node.allocatableGpus = gpus;
    if (*validated) {
      f.node.labels = {{"podshaper.io/topology-validated", validated},
                  {"podshaper.io/gpu-count", std::to_string(gpus)},
                  {"podshaper.io/memlock", memlock},
                  {"podshaper.io/p2p", "all"}};
    }
    nodes.push_back(std::move(f));
    return &nodes.back();
  };
  add("a", 8, "true", "unlimited");
  add("b", 8, "false", "unlimited")->notValidatedReason = "P2PUnavailable";
  add("c", 4, "true", "4194304");
  add("d", 8, "", "");
  add("e", 8, "true", "unlimited")->node.unschedulable = true;
  add("f", 8, "true", "unlimited")->node.taints = {{"podshaper.io/topology-not-validated", "LinkTooSlow", "NoSchedule"}};
  add("g", 8, "true", "unlimited")->exclusivePods = {"ml/train-0"};
  return nodes;
}

void checkSerialises(const EventSpec& e, const std::string& what) {
  const json event = eventObject({"v1", "Pod", "p", "u", "ml"}, e, "ml", "op", 1795000000000000LL, 1);
  try {
    (void)event.dump();
  } catch (const json::exception& ex) {
    FUZZ_CHECK(false, what + ": " + ex.what());
  }
  FUZZ_CHECK(event["message"].get<std::string>().size() <= 1024, what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::asText(data, size);
  if (nestedDeeperThan(text, 64)) return 0;  // the operator's informer refuses such bodies first
  json pod = json::parse(text, nullptr, false);
  if (pod.is_discarded()) return 0;
  static const std::vector<NodeFacts> nodes = someNodes();

  const PendingJudgement p = judgePending(pod, nodes, 1795000100, 30);
  if (p.event) {
    FUZZ_CHECK(p.pending, fuzz::show(pod));
    FUZZ_CHECK(p.event->type == "Warning" && p.event->reason == reasons::kNotPlaceable, p.event->message);
    FUZZ_CHECK(p.event->message.starts_with("Pending for "), p.event->message);
    FUZZ_CHECK(p.event->message.substr(p.event->message.find(": ") + 2) == p.answer, p.event->message);
    checkSerialises(*p.event, "NotPlaceable");
  }
  if (p.lookAgainAfter) FUZZ_CHECK(*p.lookAgainAfter >= 1 && *p.lookAgainAfter <= 86400, fuzz::show(pod));
  if (!p.pending) FUZZ_CHECK(!p.event && !p.lookAgainAfter, fuzz::show(pod));

  const std::string uid = stringMember(member(pod, "metadata"), "uid");
  // The logs logsToRead asks for, each "read" as the whole input (any text a container prints).
  std::map<std::string, std::string> logs;
  const std::string evidence = shmEvidence(std::string(reinterpret_cast<const char*>(data), size));
  for (const LogToRead& ask : logsToRead(pod)) {
    FUZZ_CHECK(ask.key.starts_with(uid + "/" + ask.container + "/"), ask.key);
    logs[ask.key] = evidence;
  }
  for (const ShmFailure& f : judgeTerminations(pod, logs)) {
    FUZZ_CHECK(f.event.type == "Warning" && f.event.reason == reasons::kShmExhausted, f.event.message);
    FUZZ_CHECK(f.key.starts_with(uid + "/" + f.container + "/"), f.key);
    const std::size_t open = f.event.message.find(" (\"");
    if (open != std::string::npos && f.event.message.find("\"). ", open) != std::string::npos) {
      const std::string quoted = f.event.message.substr(open + 3, f.event.message.find("\"). ", open) - open - 3);
      FUZZ_CHECK(quoted.size() <= 200 || quoted.find("\"). ") != std::string::npos, quoted);
      for (char c : quoted) FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f, quoted);
    }
    checkSerialises(f.event, "ShmExhausted");
    checkSerialises(ownerEvent(pod, f), "ShmExhausted on the owner");
  }
  return 0;
}
