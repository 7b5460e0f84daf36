// The webhook's configuration file (shaping/config.h: parseConfig, yaml-cpp; the
// webhook's loadConfig only reads the file and calls it). Invariants: a parse
// gives a Config or an error that says "config: "; a Config's settings are in
// their documented ranges, its hash is 16 hex digits, and writing it back as
// YAML parses to the same Config.

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "shaping/config.h"

namespace {

using podshaper::Config;

std::string toYaml(const Config& c) {
  std::string y = "defaults:\n";
  y += "  workers: " + std::to_string(c.podDefaults.workers) + "\n";
  y += "  prefetchFactor: " + std::to_string(c.podDefaults.prefetchFactor) + "\n";
  y += "  headroomPercent: " + std::to_string(c.shm.headroomPercent) + "\n";
  y += "  ncclCommunicators: " + std::to_string(c.podDefaults.ncclCommunicators) + "\n";
  y += "  gpusPerNode: " + std::to_string(c.node.gpusPerNode) + "\n";
  if (c.node.nodeMemory) y += "  nodeMemory: " + std::to_string(*c.node.nodeMemory) + "\n";
  y += "ncclShmPerCommunicator:\n  net: " + std::to_string(c.shm.ncclShmPerCommunicator.net) + "\n  p2p: " +
       std::to_string(c.shm.ncclShmPerCommunicator.p2p) + "\n  shm: " + std::to_string(c.shm.ncclShmPerCommunicator.shm) + "\n";
  y += "limits:\n  maxShmPercentOfNodeMemory: " + std::to_string(c.shm.maxShmPercentOfNodeMemory) + "\n";
  y += "partialNode: " + std::string(podshaper::toString(c.node.partialNode)) + "\n";
  y += "podSecurity: " + std::string(podshaper::toString(c.podSecurity)) + "\n";
  y += "memlock: " + c.node.memlock.text() + "\n";
  y += "gpuDeviceClass: " + c.gpuDeviceClass + "\n";  // a DNS subdomain: plain YAML
  y += std::string("shm:\n  adoptOwnVolume: ") + (c.shm.adoptOwnVolume ? "true" : "false") + "\n";
  return y;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(podshaper::fuzz::asText(data, size));
  auto parsed = podshaper::parseConfig(text);
  if (!parsed) {
    FUZZ_CHECK(parsed.error().message.starts_with("config: "), parsed.error().message);
    return 0;
  }
  const Config& c = *parsed;
  FUZZ_CHECK(c.podDefaults.workers <= 1024, text);
  FUZZ_CHECK(c.podDefaults.prefetchFactor >= 1 && c.podDefaults.prefetchFactor <= 1024, text);
  FUZZ_CHECK(c.shm.headroomPercent <= 1000, text);
  FUZZ_CHECK(c.podDefaults.ncclCommunicators <= 1024, text);
  FUZZ_CHECK(c.shm.ncclShmPerCommunicator.net >= 0 && c.shm.ncclShmPerCommunicator.p2p >= 0 && c.shm.ncclShmPerCommunicator.shm >= 0,
             text);
  FUZZ_CHECK(c.node.gpusPerNode >= 1 && c.node.gpusPerNode <= 1024, text);
  FUZZ_CHECK(!c.node.nodeMemory || *c.node.nodeMemory >= 0, text);
  FUZZ_CHECK(c.shm.maxShmPercentOfNodeMemory >= 1 && c.shm.maxShmPercentOfNodeMemory <= 100, text);
  FUZZ_CHECK(!c.node.memlock.bytes || *c.node.memlock.bytes >= 1, text);
  const std::string hash = c.hash();
  FUZZ_CHECK(hash.size() == 16 && hash.find_first_not_of("0123456789abcdef") == std::string::npos, hash);

  const std::string yaml = toYaml(c);
  auto again = podshaper::parseConfig(yaml);
  FUZZ_CHECK(again.ok(), again.ok() ? "" : again.error().message + "\n" + yaml);
  FUZZ_CHECK(again->hash() == hash, text + "\n--- written back as\n" + yaml);
  return 0;
}
