#pragma once

// Recordings replayed through the real backend, and the synthetic NVL72-class racks of tests/fixtures/mnnvl (its README): each node's GPU
// recording, made from the node template (gb200-node.json) and the racks' parameters
// (racks.json). A helper of the tests rather than 72 stored recordings: nodes of a rack
// differ only in their GPUs' UUIDs, their clique and what a rack changes on a few of them.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/backend.h"
#include "agent/gpu_recording.h"

namespace podshaper::agent {

// What the real backend makes of a recording: the probe a node answering it would report.
inline Result<Topology> probeRecording(const nlohmann::json& recording, bool measureBandwidth = false) {
  auto sources = replayGpus(recording);
  if (!sources) return sources.error();
  return makeNvmlBackend(std::move(*sources), measureBandwidth)->probe();
}

struct RackNode {
  std::string name;  // "<rack>-<node, from 00>"
  int node = 0;
  nlohmann::json recording;
};

inline nlohmann::json mnnvlFixture(const std::string& name) {
  std::ifstream in(std::string(PODSHAPER_FIXTURES_DIR) + "/mnnvl/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

// A recording spoiled one way, and how the refusal of it starts.
struct Spoiled {
  std::function<void(nlohmann::json&)> spoil;
  std::string says;
};

// Each spoiled copy of `recording` is refused, saying what its case says.
inline void expectEachRefused(const nlohmann::json& recording, const std::vector<Spoiled>& cases) {
  for (const Spoiled& c : cases) {
    nlohmann::json spoiled = recording;
    c.spoil(spoiled);
    auto sources = replayGpus(spoiled);
    ASSERT_FALSE(sources.ok()) << c.says;
    EXPECT_TRUE(sources.error().message.starts_with(c.says)) << sources.error().message;
  }
}

// Every node of the rack named `rack` in racks.json, in order; none for another name.
inline std::vector<RackNode> rackNodes(const std::string& rack) {
  const nlohmann::json racks = mnnvlFixture("racks.json");
  const nlohmann::json node = mnnvlFixture(racks["template"].get<std::string>());
  std::vector<RackNode> out;
  for (std::size_t r = 0; r < racks["racks"].size(); ++r) {
    const nlohmann::json& spec = racks["racks"][r];
    if (spec["name"] != rack) continue;
    for (const nlohmann::json& clique : spec["cliques"]) {
      for (int i = 0; i < clique["nodes"].get<int>(); ++i) {
        RackNode n;
        n.node = static_cast<int>(out.size());
        char name[64];
        std::snprintf(name, sizeof name, "%s-%02d", rack.c_str(), n.node);
        n.name = name;
        n.recording = node;
        nlohmann::json& gpus = n.recording["nvml"]["gpus"];
        for (std::size_t g = 0; g < gpus.size(); ++g) {
          char uuid[64];
          std::snprintf(uuid, sizeof uuid, "GPU-%08zx-0000-4000-8000-%012zx", r, n.node * gpus.size() + g);
          gpus[g]["uuid"] = uuid;
          gpus[g]["fabric"]["clusterUuid"] = spec["clusterUuid"];
          gpus[g]["fabric"]["cliqueId"] = clique["cliqueId"];
        }
        // What the rack changes on some nodes (all their GPUs, or the one named).
        for (const nlohmann::json& change : spec.value("nodes", nlohmann::json::array())) {
          if (change["node"] != n.node) continue;
          for (std::size_t g = 0; g < gpus.size(); ++g) {
            if (change.contains("gpu") && change["gpu"] != g) continue;
            for (const char* key : {"state", "status", "healthMask"}) {
              if (change.contains(key)) gpus[g]["fabric"][key] = change[key];
            }
          }
        }
        out.push_back(std::move(n));
      }
    }
  }
  return out;
}

}  // namespace podshaper::agent
