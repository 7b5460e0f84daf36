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
  y += "  workers: " + std::to_string(c.workers) + "\n";
  y += "  prefetchFactor: " + std::to_string(c.prefetchFactor) + "\n";
  y += "  headroomPercent: " + std::to_string(c.headroomPercent) + "\n";
  y += "  ncclCommunicators: " + std::to_string(c.ncclCommunicators) + "\n";
  y += "  gpusPerNode: " + std::to_string(c.gpusPerNode) + "\n";
  if (c.nodeMemory) y += "  nodeMemory: " + std::to_string(*c.nodeMemory) + "\n";
  y += "ncclShmPerCommunicator:\n  net: " + std::to_string(c.ncclShmPerCommunicator.net) + "\n  p2p: " +
       std::to_string(c.ncclShmPerCommunicator.p2p) + "\n  shm: " + std::to_string(c.ncclShmPerCommunicator.shm) + "\n";
  y += "limits:\n  maxShmPercentOfNodeMemory: " + std::to_string(c.maxShmPercentOfNodeMemory) + "\n";
  y += "partialNode: " + std::string(podshaper::toString(c.partialNode)) + "\n";
  y += "podSecurity: " + std::string(podshaper::toString(c.podSecurity)) + "\n";
  y += "memlock: " + c.memlock.text() + "\n";
  y += "gpuDeviceClass: " + c.gpuDeviceClass + "\n";  // a DNS subdomain: plain YAML
  y += std::string("shm:\n  adoptOwnVolume: ") + (c.adoptOwnShmVolume ? "true" : "false") + "\n";
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
  FUZZ_CHECK(c.workers <= 1024, text);
  FUZZ_CHECK(c.prefetchFactor >= 1 && c.prefetchFactor <= 1024, text);
  FUZZ_CHECK(c.headroomPercent <= 1000, text);
  FUZZ_CHECK(c.ncclCommunicators <= 1024, text);
  FUZZ_CHECK(c.ncclShmPerCommunicator.net >= 0 && c.ncclShmPerCommunicator.p2p >= 0 && c.ncclShmPerCommunicator.shm >= 0,
             text);
  FUZZ_CHECK(c.gpusPerNode >= 1 && c.gpusPerNode <= 1024, text);
  FUZZ_CHECK(!c.nodeMemory || *c.nodeMemory >= 0, text);
  FUZZ_CHECK(c.maxShmPercentOfNodeMemory >= 1 && c.maxShmPercentOfNodeMemory <= 100, text);
  FUZZ_CHECK(!c.memlock.bytes || *c.memlock.bytes >= 1, text);
  const std::string hash = c.hash();
  FUZZ_CHECK(hash.size() == 16 && hash.find_first_not_of("0123456789abcdef") == std::string::npos, hash);

  const std::string yaml = toYaml(c);
  auto again = podshaper::parseConfig(yaml);
  FUZZ_CHECK(again.ok(), again.ok() ? "" : again.error().message + "\n" + yaml);
  FUZZ_CHECK(again->hash() == hash, text + "\n--- written back as\n" + yaml);
  return 0;
}
