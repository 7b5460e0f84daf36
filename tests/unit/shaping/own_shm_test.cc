// A /dev/shm of the user's: what podshaper keeps, writes and warns of, and what it
// adopts with config shm.adoptOwnVolume (docs/webhook.md "A /dev/shm of the user's").
#include <gtest/gtest.h>

#include <string>

#include "pod_builder.h"
#include "shaping/pod_shaper.h"

namespace podshaper {
namespace {

using nlohmann::json;
using testing::TrainingPod;

// The seed pod without a cluster view: it needs 8231Mi (6008Mi + SHM's NCCL reserve).
constexpr const char* kNeed = "8231Mi";
constexpr const char* kFormulaEnd = "/dev/shm = 8231Mi needed; ";

ShapeOutcome shape(const json& pod, Config config = {}) {
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  return shapePod(pod, config, ctx);
}

Config adopting() {
  Config config;
  config.shm.adoptOwnVolume = true;
  return config;
}

// The seed pod whose container mounts `volume` at /dev/shm.
TrainingPod withOwnShm(json volume) {
  TrainingPod pod;
  const std::string name = volume["name"];
  pod.at("/spec/volumes", json::array({std::move(volume)}));
  pod.at("/spec/containers/0/volumeMounts", json::array({{{"name", name}, {"mountPath", "/dev/shm"}}}));
  return pod;
}

json memoryDir(const char* name, const char* sizeLimit = nullptr) {
  json v = {{"name", name}, {"emptyDir", {{"medium", "Memory"}}}};
  if (sizeLimit) v["emptyDir"]["sizeLimit"] = sizeLimit;
  return v;
}

const json& annotationsOf(const ShapeOutcome& out) { return out.pod["metadata"]["annotations"]; }
std::string formulaOf(const ShapeOutcome& out) { return annotationsOf(out)["podshaper.io/shm-formula"]; }
bool hasShmSize(const ShapeOutcome& out) { return annotationsOf(out).contains("podshaper.io/shm-size"); }

// The one warning that names the /dev/shm of the pod's own, told and kept alike.
std::string ownShmWarning(const ShapeOutcome& out) {
  std::string found;
  for (const std::string& w : out.warnings) {
    if (w.find("/dev/shm, ") == std::string::npos) continue;
    EXPECT_TRUE(found.empty()) << "a second warning: " << w;
    found = w;
    const std::string kept = annotationsOf(out).value("podshaper.io/warnings", "");
    EXPECT_NE(kept.find(w.substr(std::string("podshaper: ").size())), std::string::npos) << kept;
  }
  return found;
}

std::string endsWith(const std::string& text, std::size_t n) { return text.substr(text.size() - std::min(n, text.size())); }

TEST(OwnShm, ALimitLargerThanTheNeedIsTheShmSizeAsWrittenAndNotWarned) {
  auto out = shape(withOwnShm(memoryDir("dshm", "250Gi")));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(annotationsOf(out)["podshaper.io/shm-size"], "250Gi");
  const std::string f = formulaOf(out);
  EXPECT_NE(f.find(std::string(kFormulaEnd) +
                   "/dev/shm is the pod's own emptyDir \"dshm\" (medium Memory, sizeLimit 250Gi), kept as written"),
            std::string::npos)
      << f;
  EXPECT_EQ(f.find("/dev/shm = 8231Mi;"), std::string::npos) << f;
  EXPECT_EQ(ownShmWarning(out), "");
  // The volume, the mount and the memory are the user's.
  EXPECT_EQ(out.pod["spec"]["volumes"], json::array({memoryDir("dshm", "250Gi")}));
  EXPECT_EQ(out.pod["spec"]["containers"][0]["resources"]["limits"]["memory"], "100Gi");
  // A shm-size the user wrote is podshaper's to write: it says the pod's /dev/shm.
  auto told = shape(withOwnShm(memoryDir("dshm", "250Gi")).annotate("podshaper.io/shm-size", "1Gi"));
  EXPECT_EQ(annotationsOf(told)["podshaper.io/shm-size"], "250Gi");
}

TEST(OwnShm, ALimitBelowTheNeedIsWarnedWithWhatToRaise) {
  auto out = shape(withOwnShm(memoryDir("dshm", "1Gi")));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(annotationsOf(out)["podshaper.io/shm-size"], "1Gi");
  EXPECT_NE(formulaOf(out).find("emptyDir \"dshm\" (medium Memory, sizeLimit 1Gi), kept as written"), std::string::npos);
  EXPECT_EQ(ownShmWarning(out),
            "podshaper: container \"trainer\" keeps its own /dev/shm, emptyDir \"dshm\" (medium Memory, sizeLimit 1Gi), "
            "smaller than the 8231Mi its ranks need: DataLoader workers may die with a bus error and NCCL fail to make "
            "its segments; raise the volume's sizeLimit to at least 8231Mi, or drop the /dev/shm mount and podshaper "
            "mounts a /dev/shm of 8231Mi and raises the memory for it");
  EXPECT_EQ(out.pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "1Gi");
}

TEST(OwnShm, NoSizeLimitHasNoShmSizeAndSaysWhatOfTheMemoryLimitItTakes) {
  auto out = shape(withOwnShm(memoryDir("dshm")));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_FALSE(hasShmSize(out));
  EXPECT_NE(formulaOf(out).find(std::string(kFormulaEnd) +
                                "/dev/shm is the pod's own emptyDir \"dshm\" (medium Memory, no sizeLimit: up to the "
                                "pod's memory limit), kept as written"),
            std::string::npos)
      << formulaOf(out);
  const std::string w = ownShmWarning(out);
  EXPECT_NE(w.find("the 8231Mi its ranks need would take 8231Mi of the container's 100Gi memory limit, which "
                   "podshaper did not raise; give the volume a sizeLimit of at least 8231Mi"),
            std::string::npos)
      << w;
  auto small = shape(withOwnShm(memoryDir("dshm")).at("/spec/containers/0/resources/limits/memory", "4Gi"));
  EXPECT_NE(ownShmWarning(small).find("would take more than the container's 4Gi memory limit, which podshaper did not "
                                      "raise: it would be OOM-killed"),
            std::string::npos);
  auto unlimited = shape(withOwnShm(memoryDir("dshm"))
                             .without("/spec/containers/0/resources/limits/memory")
                             .without("/spec/containers/0/resources/requests"));
  EXPECT_NE(ownShmWarning(unlimited).find("the 8231Mi its ranks need would come from the node's memory: the container "
                                          "has no memory limit"),
            std::string::npos)
      << ownShmWarning(unlimited);
}

TEST(OwnShm, TheHostsShmHasNoShmSizeAndIsWarnedAsShared) {
  auto out = shape(withOwnShm({{"name", "host-shm"}, {"hostPath", {{"path", "/dev/shm"}}}}));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_FALSE(hasShmSize(out));
  EXPECT_NE(formulaOf(out).find("/dev/shm is the pod's own hostPath \"host-shm\" (the host's /dev/shm), kept as written"),
            std::string::npos)
      << formulaOf(out);
  const std::string w = ownShmWarning(out);
  for (const char* part : {"shared with every pod on the node", "not counted against the pod's memory",
                           "not cleared when the pod ends", "the 8231Mi its ranks need must be free there"}) {
    EXPECT_NE(w.find(part), std::string::npos) << part << " in " << w;
  }
  // Another directory of the host is named as it is.
  auto other = shape(withOwnShm({{"name", "host-shm"}, {"hostPath", {{"path", "/run/shm"}}}}));
  EXPECT_NE(formulaOf(other).find("hostPath \"host-shm\" (the host's directory \"/run/shm\")"), std::string::npos);
}

TEST(OwnShm, AnEmptyDirNotInMemoryIsSaidToBeOnDisk) {
  auto out = shape(withOwnShm({{"name", "scratch"}, {"emptyDir", json::object()}}));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_FALSE(hasShmSize(out));
  EXPECT_NE(formulaOf(out).find("emptyDir \"scratch\" (on the node's disk, not in memory, no sizeLimit), kept as written"),
            std::string::npos)
      << formulaOf(out);
  EXPECT_NE(ownShmWarning(out).find("go through the node's disk, slower than memory; set medium: Memory with a "
                                    "sizeLimit of at least 8231Mi"),
            std::string::npos);
  // With a sizeLimit, that is the /dev/shm the pod will have; below the need it says so.
  auto sized = shape(withOwnShm({{"name", "scratch"}, {"emptyDir", {{"sizeLimit", "2Gi"}}}}));
  EXPECT_EQ(annotationsOf(sized)["podshaper.io/shm-size"], "2Gi");
  EXPECT_NE(ownShmWarning(sized).find("and its sizeLimit is below the 8231Mi its ranks need"), std::string::npos);
}

TEST(OwnShm, GpuContainersWithVolumesOfTheirOwnAreEachNamedAndNoShmSizeIsGuessed) {
  json eval = {{"name", "eval"},
               {"resources", {{"limits", {{"nvidia.com/gpu", "2"}, {"memory", "10Gi"}}}}},
               {"volumeMounts", json::array({{{"name", "eval-shm"}, {"mountPath", "/dev/shm"}}})}};
  auto pod = withOwnShm(memoryDir("train-shm", "64Gi")).withGpus(6).withContainer(eval);
  pod.at("/spec/volumes/1", memoryDir("eval-shm"));
  auto out = shape(pod);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_FALSE(hasShmSize(out));
  EXPECT_FALSE(out.pod["spec"]["volumes"].size() > 2);  // no volume of podshaper's
  const std::string f = formulaOf(out);
  EXPECT_NE(f.find(std::string(kFormulaEnd) +
                   "container \"trainer\" (6 GPUs, 6174Mi of the need): /dev/shm is the pod's own emptyDir "
                   "\"train-shm\" (medium Memory, sizeLimit 64Gi), kept as written; container \"eval\" (2 GPUs, "
                   "2058Mi of the need): /dev/shm is the pod's own emptyDir \"eval-shm\" (medium Memory, no sizeLimit: "
                   "up to the pod's memory limit), kept as written"),
            std::string::npos)
      << f;
  EXPECT_NE(ownShmWarning(out).find("container \"eval\" keeps its own /dev/shm, emptyDir \"eval-shm\" (medium Memory, "
                                    "no sizeLimit: up to the pod's memory limit): the 2058Mi its ranks need would take "
                                    "2058Mi of the container's 10Gi memory limit"),
            std::string::npos)
      << ownShmWarning(out);

  // One of them on podshaper's volume: shm-size is that volume's, the other is named.
  pod.without("/spec/containers/0/volumeMounts");
  auto mixed = shape(pod);
  ASSERT_TRUE(mixed.allowed) << mixed.message;
  EXPECT_EQ(annotationsOf(mixed)["podshaper.io/shm-size"], "6174Mi");
  EXPECT_NE(formulaOf(mixed).find("needed; podshaper's /dev/shm serves the containers holding 6 of the pod's 8 GPUs: "
                                  "6174Mi; container \"eval\" (2 GPUs, 2058Mi of the need): /dev/shm is the pod's own "
                                  "emptyDir \"eval-shm\""),
            std::string::npos)
      << formulaOf(mixed);
}

TEST(OwnShm, TwoGpuContainersOnOneVolumeOfTheirsShareIt) {
  json eval = {{"name", "eval"},
               {"resources", {{"limits", {{"nvidia.com/gpu", "2"}, {"memory", "10Gi"}}}}},
               {"volumeMounts", json::array({{{"name", "dshm"}, {"mountPath", "/dev/shm"}}})}};
  auto out = shape(withOwnShm(memoryDir("dshm", "4Gi")).withGpus(6).withContainer(eval));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(annotationsOf(out)["podshaper.io/shm-size"], "4Gi");
  EXPECT_NE(formulaOf(out).find("needed; /dev/shm is the pod's own emptyDir \"dshm\""), std::string::npos);
  EXPECT_NE(ownShmWarning(out).find("containers \"trainer\" and \"eval\" keep their own /dev/shm"), std::string::npos)
      << ownShmWarning(out);
  EXPECT_NE(ownShmWarning(out).find("smaller than the 8231Mi their ranks need"), std::string::npos);
}

TEST(OwnShm, AdoptionIsOffByDefault) {
  EXPECT_FALSE(Config{}.shm.adoptOwnVolume);
  auto out = shape(withOwnShm(memoryDir("dshm")));
  EXPECT_FALSE(out.pod["spec"]["volumes"][0]["emptyDir"].contains("sizeLimit"));
}

TEST(OwnShm, AnAdoptedVolumeGetsTheNeedAndTheMemoryForIt) {
  for (const char* before : {"", "1Gi"}) {
    SCOPED_TRACE(before);
    auto out = shape(withOwnShm(memoryDir("dshm", *before ? before : nullptr)), adopting());
    ASSERT_TRUE(out.allowed) << out.message;
    EXPECT_EQ(out.pod["spec"]["volumes"], json::array({memoryDir("dshm", kNeed)}));
    EXPECT_EQ(out.pod["spec"]["containers"][0]["volumeMounts"].size(), 1u);
    const json& resources = out.pod["spec"]["containers"][0]["resources"];
    EXPECT_EQ(resources["limits"]["memory"], "110631Mi");  // 100Gi + 8231Mi, as for podshaper's own volume
    EXPECT_EQ(resources["requests"]["memory"], "110631Mi");
    EXPECT_EQ(annotationsOf(out)["podshaper.io/shm-size"], kNeed);
    EXPECT_NE(formulaOf(out).find(std::string(kFormulaEnd) + "/dev/shm is the pod's own emptyDir \"dshm\" (medium "
                                                              "Memory, "),
              std::string::npos);
    EXPECT_NE(endsWith(formulaOf(out), 60).find("adopted: sizeLimit set to 8231Mi (config shm.adoptOwnVolume)"),
              std::string::npos)
        << formulaOf(out);
    EXPECT_NE(ownShmWarning(out).find("adopted (config shm.adoptOwnVolume): sizeLimit set to 8231Mi"),
              std::string::npos)
        << ownShmWarning(out);
  }
}

TEST(OwnShm, WhatIsNeverAdopted) {
  // A sizeLimit at or above the need is never lowered.
  auto larger = shape(withOwnShm(memoryDir("dshm", "250Gi")), adopting());
  EXPECT_EQ(larger.pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "250Gi");
  EXPECT_EQ(larger.pod["spec"]["containers"][0]["resources"]["limits"]["memory"], "100Gi");
  // The host's, and one on disk.
  auto host = shape(withOwnShm({{"name", "h"}, {"hostPath", {{"path", "/dev/shm"}}}}), adopting());
  EXPECT_EQ(host.pod["spec"]["volumes"][0], json({{"name", "h"}, {"hostPath", {{"path", "/dev/shm"}}}}));
  auto disk = shape(withOwnShm({{"name", "d"}, {"emptyDir", json::object()}}), adopting());
  EXPECT_EQ(disk.pod["spec"]["volumes"][0], json({{"name", "d"}, {"emptyDir", json::object()}}));
  // One a container without GPUs mounts too, or a GPU container at another path.
  json sidecar = {{"name", "logger"}, {"volumeMounts", json::array({{{"name", "dshm"}, {"mountPath", "/shm"}}})}};
  auto shared = shape(withOwnShm(memoryDir("dshm")).withContainer(sidecar), adopting());
  ASSERT_TRUE(shared.allowed) << shared.message;
  EXPECT_FALSE(shared.pod["spec"]["volumes"][0]["emptyDir"].contains("sizeLimit"));
  EXPECT_EQ(shared.pod["spec"]["containers"][0]["resources"]["limits"]["memory"], "100Gi");
  EXPECT_FALSE(hasShmSize(shared));
  auto twice = withOwnShm(memoryDir("dshm"));
  twice.at("/spec/containers/0/volumeMounts/1", {{"name", "dshm"}, {"mountPath", "/data"}});
  EXPECT_FALSE(shape(twice, adopting()).pod["spec"]["volumes"][0]["emptyDir"].contains("sizeLimit"));
}

}  // namespace
}  // namespace podshaper
