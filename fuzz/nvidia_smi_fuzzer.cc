// The agent's fake backend and the captures it reads: `nvidia-smi topo -m`
// (optionally followed by `topo -p2p r`) text → Topology (api/topology.h).
// Invariants: a parsed topology has GPUs 0..n-1 and one pair per GPU pair,
// matching nvidiaSmiMatrixShapes(); toJson → topologyFromJson gives it back
// unchanged; renderTopologyTable draws it.

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/topology.h"
#include "base/quantity.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = podshaper::fuzz::asText(data, size);
  const auto shapes = podshaper::nvidiaSmiMatrixShapes(text);
  auto parsed = podshaper::parseNvidiaSmiTopology(text);
  if (!parsed) {
    FUZZ_CHECK(parsed.error().message.starts_with("topology: "), parsed.error().message);
    return 0;
  }
  const podshaper::Topology& t = *parsed;
  const std::size_t n = t.gpus.size();
  FUZZ_CHECK(!shapes.empty() && static_cast<std::size_t>(shapes[0].gpuColumns) == n &&
                 static_cast<std::size_t>(shapes[0].gpuRows) == n,
             std::string(text));
  FUZZ_CHECK(t.pairs.size() == n * (n - 1) / 2 || n == 0, std::string(text));
  for (std::size_t i = 0; i < n; ++i) FUZZ_CHECK(t.gpus[i].index == static_cast<int>(i), std::string(text));
  for (const auto& p : t.pairs) {
    FUZZ_CHECK(p.a >= 0 && p.a < p.b && static_cast<std::size_t>(p.b) < n, std::string(text));
    if (p.link.starts_with("NV")) {
      auto count = podshaper::parseCount(p.link.substr(2));
      FUZZ_CHECK(count.ok() && static_cast<uint64_t>(p.nvlinks) == *count, p.link + " → " + std::to_string(p.nvlinks));
    } else {
      FUZZ_CHECK(p.nvlinks == 0 && p.pcie == p.link, p.link);
    }
  }

  const nlohmann::json j = podshaper::toJson(t);
  auto back = podshaper::topologyFromJson(j);
  FUZZ_CHECK(back.ok(), back.ok() ? "" : back.error().message + "\n" + podshaper::fuzz::show(j));
  const nlohmann::json again = podshaper::toJson(*back);
  FUZZ_CHECK(again == j, "toJson → topologyFromJson → toJson differs: " + podshaper::fuzz::show(nlohmann::json::diff(j, again)) +
                             "\ninput:\n" + std::string(text));

  const std::string table = podshaper::renderTopologyTable(t);
  FUZZ_CHECK(table.find("verdict: ") != std::string::npos, table);
  return 0;
}
