#pragma once

#include <string_view>

#include "api/node_labels.h"  // the node labels of placement, with their values and encoding

// One name for one thing: every annotation, label, volume and resource name
// podshaper reads or writes is spelled here and nowhere else.
namespace podshaper::names {

// The API: podshaper's group and version, its CRDs' kinds and resources, and the prefix of
// every podshaper label and annotation key.
inline constexpr std::string_view kGroupVersion = "podshaper.io/v1alpha1";
inline constexpr std::string_view kReportKind = "GPUTopologyReport";
inline constexpr std::string_view kReportResource = "gputopologyreports";
inline constexpr std::string_view kPolicyResource = "topologypolicies";
// What podshaper-shm measured of a pod's /dev/shm (docs/shm.md): one per pod, in its namespace.
inline constexpr std::string_view kShmUsageResource = "shmusages";
// A workload's /dev/shm runs and what its next pod needs (docs/shm.md "Sizing from measured
// use"): one per workload, in its namespace, written by the operator.
inline constexpr std::string_view kShmProfileKind = "ShmProfile";
inline constexpr std::string_view kShmProfileResource = "shmprofiles";
inline constexpr std::string_view kKeyPrefix = "podshaper.io/";

// Pod annotations read by the webhook.
inline constexpr std::string_view kWorkers = "podshaper.io/dataloader-workers";
inline constexpr std::string_view kPrefetchFactor = "podshaper.io/prefetch-factor";
inline constexpr std::string_view kBatchBytes = "podshaper.io/batch-bytes";
inline constexpr std::string_view kBatchShape = "podshaper.io/batch-shape";
inline constexpr std::string_view kBatchDtype = "podshaper.io/batch-dtype";
inline constexpr std::string_view kRanksPerPod = "podshaper.io/ranks-per-pod";
inline constexpr std::string_view kPlacement = "podshaper.io/placement";
inline constexpr std::string_view kNcclCommunicators = "podshaper.io/nccl-communicators";
// The workload whose ShmProfile sizes the pod, where its controller is not the one meant.
inline constexpr std::string_view kWorkload = "podshaper.io/workload";
// formula | measured | recommend: how /dev/shm is sized (config shm.sizing is the default).
inline constexpr std::string_view kShmSizing = "podshaper.io/shm-sizing";

// Pod annotations written by the webhook.
inline constexpr std::string_view kShmSize = "podshaper.io/shm-size";
inline constexpr std::string_view kShmFormula = "podshaper.io/shm-formula";
inline constexpr std::string_view kShapedBy = "podshaper.io/shaped-by";
// The pod's ShmProfile, its ranks and its declared inputs (api/shm_profile.h ProfiledPod):
// the operator puts the pod's runs in that profile.
inline constexpr std::string_view kShmProfile = "podshaper.io/shm-profile";
// The admission warnings, one per line, kept on the pod for `kubectl describe pod` (the
// create response that carried them is not read when a Job or an operator made the pod).
inline constexpr std::string_view kWarnings = "podshaper.io/warnings";
// NRI ulimit-adjuster (containerd/nri plugins/ulimit-adjuster) per-container key prefix.
inline constexpr std::string_view kUlimitAnnotationPrefix = "ulimits.noderesource.dev/container.";
// In the message of a shaped pod's container waiting with CreateContainerError, anywhere in
// it: podshaper-shm refused to create the container because the node would not apply the
// memlock its ulimit annotation asks (the NRI ulimit-adjuster plugin is not running), and
// holds it back until the node does; the words after it say what was asked and what it
// would get. The operator takes such a node off "validated" (docs/operator.md).
inline constexpr std::string_view kMemlockNotAppliedMarker = "MemlockNotApplied: ";

// Labels.
inline constexpr std::string_view kInjectLabel = "podshaper.io/inject";
inline constexpr std::string_view kPlacementLabel = "podshaper.io/placement";
// On every pod the webhook shaped ("true"): the operator watches these pods alone, to
// explain why one waits or why it died (docs/operator.md "Shaped pods explain themselves").
inline constexpr std::string_view kShapedLabel = "podshaper.io/shaped";
inline constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";
// On a node-exclusive pod whose nodes are in multi-node NVLink domains: its job, which a
// required podAffinity on podshaper.io/nvlink-domain keeps in one domain (docs/webhook.md
// "Multi-node NVLink"). A value the user wrote is kept.
inline constexpr std::string_view kNvlinkGroupLabel = "podshaper.io/nvlink-group";
// A LeaderWorkerSet's group (one NCCL world): its pods' label, a hash of the group.
inline constexpr std::string_view kLwsGroupKeyLabel = "leaderworkerset.sigs.k8s.io/group-key";
inline constexpr std::string_view kPodSecurityEnforce = "pod-security.kubernetes.io/enforce";
// On the objects podshaper makes for users to read (ShmProfiles): "podshaper".
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr std::string_view kManagedBy = "podshaper";

// On the webhook's TLS Secret: asks the operator for a new serving certificate now (any value).
inline constexpr std::string_view kRenewAnnotation = "podshaper.io/renew";

// The Node condition that carries the report's verdict (its Validated condition's status,
// reason and message), so that `kubectl describe node` shows it after the Events expire.
inline constexpr std::string_view kNodeCondition = "GPUTopologyValidated";

// The taint a TopologyPolicy's taintOnFailure puts on a Node that fails it (value: the reason).
inline constexpr std::string_view kTopologyTaint = "podshaper.io/topology-not-validated";

// Values.
inline constexpr std::string_view kNodeExclusive = "node-exclusive";
inline constexpr std::string_view kShared = "shared";

// Pod spec pieces.
inline constexpr std::string_view kShmVolume = "podshaper-dshm";
inline constexpr std::string_view kShmMountPath = "/dev/shm";
// torchrun's node count: its --nnodes flag, else this environment variable (Kubeflow's
// PyTorchJob and Trainer set it); --standalone is one node.
inline constexpr std::string_view kNnodesEnv = "PET_NNODES";
inline constexpr std::string_view kNnodesFlag = "--nnodes";
inline constexpr std::string_view kStandaloneFlag = "--standalone";
// NCCL's own switches that change what it keeps in /dev/shm.
inline constexpr std::string_view kNcclP2PDisableEnv = "NCCL_P2P_DISABLE";
inline constexpr std::string_view kNcclCuMemEnableEnv = "NCCL_CUMEM_ENABLE";
// 0: NCCL does not use the multi-node NVLink fabric (nor check for its IMEX channel).
inline constexpr std::string_view kNcclMnnvlEnableEnv = "NCCL_MNNVL_ENABLE";
// IMEX channels given without DRA: NVIDIA's container toolkit injects those this variable
// names (a number, a list, or all); or the host's channel devices mounted as a hostPath.
inline constexpr std::string_view kImexChannelsEnv = "NVIDIA_IMEX_CHANNELS";
inline constexpr std::string_view kImexChannelsHostPath = "/dev/nvidia-caps-imex-channels";

// Gang scheduling a pod may be under, which places a job's pods together or not at all:
// the Workload API (Kubernetes 1.35 spec.workloadRef; spec.schedulingGroup from 1.36),
// Kueue's topology-aware scheduling, Volcano and scheduler-plugins' coscheduling.
inline constexpr std::string_view kWorkloadRefField = "workloadRef";
inline constexpr std::string_view kSchedulingGroupField = "schedulingGroup";
inline constexpr std::string_view kKueueRequiredTopology = "kueue.x-k8s.io/podset-required-topology";
inline constexpr std::string_view kVolcanoGroupName = "scheduling.k8s.io/group-name";
inline constexpr std::string_view kCoschedulingPodGroup = "scheduling.x-k8s.io/pod-group";
inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";
inline constexpr std::string_view kNprocEnv = "PET_NPROC_PER_NODE";
inline constexpr std::string_view kIpcLock = "IPC_LOCK";
// Set on shaped containers that chose no terminationMessagePolicy: the log's tail reaches
// the pod's status, where the operator reads a DataLoader's or NCCL's last words.
inline constexpr std::string_view kFallbackToLogsOnError = "FallbackToLogsOnError";
// The agent pod's container that asks the runtime for the memlock shaped pods get.
inline constexpr std::string_view kMemlockProbeContainer = "memlock-probe";

}  // namespace podshaper::names
