#include "shaping/config.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

TEST(Config, EmptyMeansDefaults) {
  auto c = parseConfig("");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->podDefaults.workers, 4u);
  EXPECT_EQ(c->podDefaults.prefetchFactor, 2u);
  EXPECT_EQ(c->shm.headroomPercent, 20u);
  EXPECT_EQ(c->podDefaults.ncclCommunicators, 4u);
  EXPECT_EQ(c->shm.ncclShmPerCommunicator.net, 34213888);  // NCCL 2.28's proxy pool, in pages
  EXPECT_EQ(c->shm.ncclShmPerCommunicator.p2p, 0);
  EXPECT_EQ(c->shm.ncclShmPerCommunicator.shm, 72814592);
  EXPECT_EQ(c->node.gpusPerNode, 8u);
  EXPECT_EQ(c->shm.maxShmPercentOfNodeMemory, 50u);
  EXPECT_EQ(c->node.partialNode, PartialNodePolicy::kDeny);
  EXPECT_EQ(c->podSecurity, PodSecurityAction::kDeny);
  EXPECT_FALSE(c->node.nodeMemory.has_value());
  EXPECT_EQ(c->node.memlock, MemlockLimit{});  // unlimited
  EXPECT_FALSE(c->shm.adoptOwnVolume);
}

TEST(Config, ReadsEveryKey) {
  auto c = parseConfig(R"(
defaults:
  workers: 8
  prefetchFactor: 4
  headroomPercent: 0
  ncclCommunicators: 0
  gpusPerNode: 4
  nodeMemory: 2Ti
ncclShmPerCommunicator:
  net: 31108Ki
  p2p: 32260Ki
  shm: 96Mi
limits:
  maxShmPercentOfNodeMemory: 25
partialNode: expand
podSecurity: warn
memlock: 4Mi
shm:
  adoptOwnVolume: true
)");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->podDefaults.workers, 8u);
  EXPECT_EQ(c->podDefaults.prefetchFactor, 4u);
  EXPECT_EQ(c->shm.headroomPercent, 0u);
  EXPECT_EQ(c->podDefaults.ncclCommunicators, 0u);
  EXPECT_EQ(c->shm.ncclShmPerCommunicator.net, 31108 * 1024);
  EXPECT_EQ(c->shm.ncclShmPerCommunicator.p2p, 32260 * 1024);
  EXPECT_EQ(c->shm.ncclShmPerCommunicator.shm, 96 * 1024 * 1024);
  EXPECT_EQ(c->node.gpusPerNode, 4u);
  EXPECT_EQ(*c->node.nodeMemory, 2LL << 40);
  EXPECT_EQ(c->shm.maxShmPercentOfNodeMemory, 25u);
  EXPECT_EQ(c->node.partialNode, PartialNodePolicy::kExpand);
  EXPECT_EQ(c->podSecurity, PodSecurityAction::kWarn);
  EXPECT_EQ(c->node.memlock.bytes, 4194304u);
  EXPECT_TRUE(c->shm.adoptOwnVolume);
  EXPECT_FALSE(parseConfig("shm:\n  adoptOwnVolume: false\n")->shm.adoptOwnVolume);
  EXPECT_EQ(parseConfig("memlock: unlimited\n")->node.memlock, MemlockLimit{});
  EXPECT_EQ(parseConfig("memlock: 64Gi\n")->node.memlock.bytes, 64ULL << 30);
}

TEST(Config, HashChangesWithSettings) {
  Config a, b;
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.hash().size(), 16u);
  b.shm.headroomPercent = 21;
  EXPECT_NE(a.hash(), b.hash());
  Config c;
  c.node.memlock = MemlockLimit{4194304};
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_EQ(c.hash(), parseConfig("memlock: 4Mi\n")->hash());
  EXPECT_NE(a.hash(), parseConfig("defaults:\n  ncclCommunicators: 3\n")->hash());
  EXPECT_NE(a.hash(), parseConfig("ncclShmPerCommunicator:\n  net: 32260Ki\n")->hash());
  EXPECT_NE(parseConfig("ncclShmPerCommunicator:\n  p2p: 1Mi\n")->hash(),
            parseConfig("ncclShmPerCommunicator:\n  shm: 1Mi\n")->hash());
  // A setting added later keeps the hash of configs that leave it at its default.
  EXPECT_EQ(a.hash(), parseConfig("gpuDeviceClass: gpu.nvidia.com\n")->hash());
  EXPECT_NE(a.hash(), parseConfig("gpuDeviceClass: gpu.example.com\n")->hash());
  EXPECT_EQ(a.hash(), parseConfig("shm:\n  adoptOwnVolume: false\n")->hash());
  EXPECT_NE(a.hash(), parseConfig("shm:\n  adoptOwnVolume: true\n")->hash());
  EXPECT_EQ(parseConfig("gpuDeviceClass: gpu.example.com\n")->gpuDeviceClass, "gpu.example.com");
}

struct BadConfig {
  const char* yaml;
  const char* errorContains;
};

class ConfigErrors : public testing::TestWithParam<BadConfig> {};

TEST_P(ConfigErrors, NameTheKey) {
  auto c = parseConfig(GetParam().yaml);
  ASSERT_FALSE(c.ok()) << GetParam().yaml;
  EXPECT_NE(c.error().message.find(GetParam().errorContains), std::string::npos) << c.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ConfigErrors,
    testing::Values(
        BadConfig{"defaults:\n  worker: 4\n", "defaults.worker: unknown key"},
        BadConfig{"default:\n  workers: 4\n", "default: unknown key"},
        BadConfig{"defaults:\n  workers: -1\n", "defaults.workers: \"-1\" is negative"},
        BadConfig{"defaults:\n  workers: four\n", "defaults.workers"},
        BadConfig{"defaults:\n  prefetchFactor: 0\n", "defaults.prefetchFactor: 0 is out of range"},
        BadConfig{"ncclShmPerCommunicator:\n  net: 32MB\n", "ncclShmPerCommunicator.net: \"32MB\" is not a quantity"},
        BadConfig{"ncclShmPerCommunicator:\n  shm: -64Mi\n", "ncclShmPerCommunicator.shm: "},
        BadConfig{"ncclShmPerCommunicator:\n  nvls: 64Mi\n", "ncclShmPerCommunicator.nvls: unknown key (known here: net, p2p, shm)"},
        BadConfig{"ncclShmPerCommunicator: 64Mi\n", "ncclShmPerCommunicator: expected a mapping"},
        BadConfig{"defaults:\n  ncclCommunicators: -1\n", "defaults.ncclCommunicators: "},
        BadConfig{"defaults:\n  ncclCommunicators: 1025\n", "defaults.ncclCommunicators: 1025 is out of range 0..1024"},
        BadConfig{"defaults:\n  ncclShmReservePerRank: 128Mi\n",
                  "defaults.ncclShmReservePerRank: replaced by defaults.ncclCommunicators and ncclShmPerCommunicator"},
        BadConfig{"defaults:\n  ncclShmReservePerRankWithP2P: 64Mi\n",
                  "defaults.ncclShmReservePerRankWithP2P: replaced by"},
        BadConfig{"defaults:\n  gpusPerNode: [8]\n", "defaults.gpusPerNode: expected a single value"},
        BadConfig{"limits:\n  maxShmPercentOfNodeMemory: 101\n", "out of range 1..100"},
        BadConfig{"partialNode: maybe\n", "partialNode: \"maybe\" is not one of deny, warn, expand"},
        BadConfig{"podSecurity: allow\n", "podSecurity: \"allow\" is not one of deny, warn"},
        BadConfig{"memlock: infinity\n", "memlock: \"infinity\" is neither unlimited nor a quantity of bytes"},
        BadConfig{"memlock: -1\n", "memlock: \"-1\" is neither unlimited nor a quantity of bytes"},
        BadConfig{"memlock: 0\n", "memlock: \"0\" is zero"},
        BadConfig{"memlock: [4Mi]\n", "memlock: expected a single value"},
        BadConfig{"gpuDeviceClass: GPU.nvidia.com\n", "gpuDeviceClass: \"GPU.nvidia.com\" is not a DeviceClass name"},
        BadConfig{"gpuDeviceClass: \"\"\n", "gpuDeviceClass: \"\" is not a DeviceClass name"},
        BadConfig{"shm:\n  adoptOwnVolume: yes\n", "shm.adoptOwnVolume: \"yes\" is not one of true, false"},
        BadConfig{"shm:\n  adopt: true\n", "shm.adopt: unknown key (known here: adoptOwnVolume, sizing)"},
        BadConfig{"shm:\n  sizing: guess\n", "shm.sizing: \"guess\" is not one of formula, measured, recommend"},
        BadConfig{"defaults: 3\n", "defaults: expected a mapping"},
        BadConfig{"- a\n- b\n", "(top level): expected a mapping"},
        BadConfig{"defaults: {workers: 4\n", "not valid YAML"},
        BadConfig{"? [a, b]\n: 1\n", "(top level): keys must be plain names"},
        BadConfig{"defaults:\n  ? {x: 1}\n  : 1\n", "defaults: keys must be plain names"}));

}  // namespace
}  // namespace podshaper
