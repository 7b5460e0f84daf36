package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// The names podshaper reads and writes (api/names.h).
const (
	annWorkers    = "podshaper.io/dataloader-workers"
	annPrefetch   = "podshaper.io/prefetch-factor"
	annBatchBytes = "podshaper.io/batch-bytes"
	annBatchShape = "podshaper.io/batch-shape"
	annBatchDtype = "podshaper.io/batch-dtype"
	annRanks      = "podshaper.io/ranks-per-pod"
	annPlacement  = "podshaper.io/placement"

	annNCCLCommunicators = "podshaper.io/nccl-communicators"

	annShmSize    = "podshaper.io/shm-size"
	labelShaped   = "podshaper.io/shaped"
	annShmFormula = "podshaper.io/shm-formula"
	annShapedBy   = "podshaper.io/shaped-by"
	annWarnings   = "podshaper.io/warnings"

	ulimitPrefix           = "ulimits.noderesource.dev/container."
	ulimitDeprecatedPrefix = "ulimits.nri.containerd.io/container."

	labelInject            = "podshaper.io/inject"
	labelPlacement         = "podshaper.io/placement"
	labelTopologyValidated = "podshaper.io/topology-validated"
	labelGPUCount          = "podshaper.io/gpu-count"
	labelMemlock           = "podshaper.io/memlock"
	labelHostname          = "kubernetes.io/hostname"

	nodeExclusive = "node-exclusive"
	shared        = "shared"

	shmVolume    = "podshaper-dshm"
	shmMountPath = "/dev/shm"
	gpuResource  = corev1.ResourceName("nvidia.com/gpu")
	nprocEnv     = "PET_NPROC_PER_NODE"
	ipcLock      = corev1.Capability("IPC_LOCK")

	// RLIM_INFINITY: the NRI ulimit-adjuster parses soft/hard as uint64 ("-1" fails).
	rlimInfinity = "18446744073709551615"
)

// What podshaper reads of a pod, and what the API server checks after the mutating
// webhooks (shaping/request_limits.h, docs/webhook.md "Limits").
const (
	apiAnnotationsLimit      = 256 * 1024 // the API server's: every annotation key's and value's bytes
	maxUlimitAnnotationBytes = 4 * 1024   // the NRI ulimit annotations podshaper parses and extends, each and in all
	maxInputAnnotationBytes  = 256        // a podshaper.io/ annotation podshaper reads its inputs from
	maxContainerName         = 63         // a container's name: a DNS label, as the API server checks
	maxGPUContainers         = 64
	maxSelectorTerms         = 64        // required nodeSelectorTerms podshaper adds its requirements to
	maxTermRequirements      = 64        // matchExpressions and matchFields of each
	maxSelectorTermsBytes    = 16 * 1024 // the keys and values of all their requirements
	maxBatchDimensions       = 16        // podshaper.io/batch-shape
)

// inputAnnotations are the annotations podshaper reads its inputs from.
var inputAnnotations = []string{annWorkers, annPrefetch, annBatchBytes, annBatchShape, annBatchDtype, annRanks,
	annNCCLCommunicators, annPlacement}

// PodShaper shapes GPU training pods on CREATE: /dev/shm sized for the DataLoader,
// memory raised to pay for it, hostIPC, IPC_LOCK, memlock (config memlock) and whole-node
// placement. It decides from the pod's annotations and the config alone (no cluster view).
type PodShaper struct {
	Config   Config
	ShapedBy string // "peer-webhook/<version> config=<hash>"
}

var _ admission.CustomDefaulter = &PodShaper{}

// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=mpod.podshaper.io,admissionReviewVersions=v1

// Default implements admission.CustomDefaulter.
func (s *PodShaper) Default(ctx context.Context, obj runtime.Object) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("podshaper: expected a Pod, got %T", obj)
	}
	if req, err := admission.RequestFromContext(ctx); err == nil &&
		(req.Operation != admissionv1.Create || req.SubResource != "") {
		return nil // only a Pod CREATE is shaped
	}
	if pod.Labels[labelInject] != "true" || alreadyShaped(pod) {
		return nil
	}
	if err := s.shape(ctx, pod); err != nil {
		return fmt.Errorf("podshaper: %w", err)
	}
	return nil
}

// alreadyShaped: what podshaper wrote says so (a re-invocation, a shaped pod's manifest
// created again); a volume that only has podshaper's name does not.
func alreadyShaped(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[annShapedBy]
	return ok
}

// annotationsBytes is the size of annotations as the API server counts it: keys and values.
func annotationsBytes(annotations map[string]string) int {
	total := 0
	for k, v := range annotations {
		total += len(k) + len(v)
	}
	return total
}

// bytesWords is "262814 B (256.7 KiB)" (KiB from 10 KiB on).
func bytesWords(n int) string {
	out := strconv.Itoa(n) + " B"
	if n < 10*1024 {
		return out
	}
	tenths := (n*10 + 512) / 1024
	return fmt.Sprintf("%s (%d.%d KiB)", out, tenths/10, tenths%10)
}

// limitWords is "256Ki (262144 B)".
func limitWords(n int) string { return fmt.Sprintf("%s (%d B)", formatBytes(uint64(n)), n) }

// cutUtf8 is podshaper's cutUtf8 (base/text.h): text cut to at most max bytes, ending in
// "..." when cut, never inside a UTF-8 character. As podshaper's, it drops the last
// multi-byte character before the cut even when that one is whole.
func cutUtf8(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	b := text[:max(limit-3, 0)]
	for len(b) > 0 && b[len(b)-1]&0xC0 == 0x80 {
		b = b[:len(b)-1]
	}
	if len(b) > 0 && b[len(b)-1] >= 0xC0 {
		b = b[:len(b)-1]
	}
	return b + "..."
}

// quoted is a user's text in a message: quoted, at most max bytes of it, as podshaper quotes.
func quoted(text string, limit int) string { return `"` + cutUtf8(text, limit) + `"` }

// checkPodSize comes before anything of the pod is read: its annotations within the API
// server's limit (it would refuse the pod anyway); then, per annotation in key order (as
// podshaper's ordered object gives them), podshaper's input annotations within 256 B and
// the NRI ulimit annotations within 4 KiB each and in all; then container names that are
// names (at most 63 bytes, unique: the API server refuses others).
func checkPodSize(pod *corev1.Pod) error {
	if total := annotationsBytes(pod.Annotations); total > apiAnnotationsLimit {
		return fmt.Errorf("metadata.annotations hold %s in all, above the API server's limit of %s: it would refuse the pod; remove the annotations it does not need",
			bytesWords(total), limitWords(apiAnnotationsLimit))
	}
	keys := slices.Sorted(maps.Keys(pod.Annotations))
	ulimits := 0
	for _, k := range keys {
		size := len(pod.Annotations[k])
		if size > maxInputAnnotationBytes && slices.Contains(inputAnnotations, k) {
			return fmt.Errorf("annotation %s is %s; podshaper reads at most %d B of its annotations (a count, a quantity, a shape such as 32x3x224x224)",
				cutUtf8(k, 100), bytesWords(size), maxInputAnnotationBytes)
		}
		if !strings.HasPrefix(k, ulimitPrefix) && !strings.HasPrefix(k, ulimitDeprecatedPrefix) {
			continue
		}
		ulimits += size
		if size > maxUlimitAnnotationBytes {
			return fmt.Errorf("annotation %s is %s; podshaper reads a ulimit list of at most %s to add RLIMIT_MEMLOCK to it: keep one entry per rlimit (- type: RLIMIT_NOFILE, soft: …, hard: …)",
				cutUtf8(k, 100), bytesWords(size), limitWords(maxUlimitAnnotationBytes))
		}
		if ulimits > maxUlimitAnnotationBytes {
			return fmt.Errorf("the pod's NRI ulimit annotations (%s<name>) hold more than %s in all, what podshaper reads to add RLIMIT_MEMLOCK: keep one entry per rlimit in each",
				ulimitPrefix, limitWords(maxUlimitAnnotationBytes))
		}
	}
	seen := map[string]bool{}
	for i := range pod.Spec.Containers {
		n := pod.Spec.Containers[i].Name
		if len(n) > maxContainerName {
			return fmt.Errorf("container name \"%s\" is %d bytes; the API server takes at most %d (a DNS label)",
				cutUtf8(n, 64), len(n), maxContainerName)
		}
		if seen[n] {
			return fmt.Errorf("two containers are named \"%s\"; the API server refuses a pod whose containers share a name: give each its own", n)
		}
		seen[n] = true
	}
	return nil
}

// checkNodeAffinitySize comes before podshaper adds its requirements to each required
// nodeSelectorTerm.
func checkNodeAffinitySize(pod *corev1.Pod) error {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	const field = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	// The keys and values of every requirement: what copying a term copies.
	bytes := 0
	for _, t := range terms {
		for _, list := range [][]corev1.NodeSelectorRequirement{t.MatchExpressions, t.MatchFields} {
			for _, r := range list {
				bytes += len(r.Key)
				for _, v := range r.Values {
					bytes += len(v)
				}
			}
		}
	}
	if bytes > maxSelectorTermsBytes {
		return fmt.Errorf("%s hold %s of keys and values; podshaper copies the terms to add its node requirements and takes at most %s: merge terms and values",
			field, bytesWords(bytes), limitWords(maxSelectorTermsBytes))
	}
	if len(terms) > maxSelectorTerms {
		return fmt.Errorf("%s has %d terms; podshaper adds its node requirements to each and takes at most %d: merge terms (a term's values list takes many values)",
			field, len(terms), maxSelectorTerms)
	}
	for i, t := range terms {
		if n := len(t.MatchExpressions) + len(t.MatchFields); n > maxTermRequirements {
			return fmt.Errorf("%s[%d] has %d requirements; podshaper takes at most %d in a term it adds its node requirements to: merge them (one key, a values list)",
				field, i, n, maxTermRequirements)
		}
	}
	return nil
}

// fitAnnotations: after shaping, the pod's annotations within the API server's limit
// (podshaper leaves its podshaper.io/warnings out first; the peer writes none). written
// are the annotations the peer wrote.
func fitAnnotations(pod *corev1.Pod, ownBytes int, written []string) error {
	total := annotationsBytes(pod.Annotations)
	if total <= apiAnnotationsLimit {
		return nil
	}
	size := func(k string) int { return len(k) + len(pod.Annotations[k]) }
	slices.SortFunc(written, func(a, b string) int {
		if d := size(b) - size(a); d != 0 {
			return d
		}
		return strings.Compare(b, a)
	})
	var what strings.Builder
	for i, k := range written[:min(len(written), 3)] {
		if i > 0 {
			what.WriteString(", ")
		}
		fmt.Fprintf(&what, "%s %s", k, bytesWords(size(k)))
	}
	if len(written) > 3 {
		fmt.Fprintf(&what, " and %d more", len(written)-3)
	}
	return fmt.Errorf("the annotations podshaper adds (%s) would take metadata.annotations to %s, above the API server's limit of %s, which would refuse the pod; it has %s of its own: remove the annotations it does not need",
		what.String(), bytesWords(total), limitWords(apiAnnotationsLimit), bytesWords(ownBytes))
}

// gpuContainer is a container that requests GPUs.
type gpuContainer struct {
	index     int
	gpus      uint64
	ownShmVol string // the user's own volume at /dev/shm, if any
}

type podInputs struct {
	containers        []gpuContainer
	podGPUs           uint64
	workers, prefetch uint64
	ranks             uint64  // 0: the pod's GPUs
	communicators     uint64  // NCCL communicators per rank
	communicatorsFrom string  // the annotation, or the config key it defaulted to
	span              jobSpan // whether the ranks talk to other nodes' ranks
	p2pOff            string  // NCCL_P2P_DISABLE=1 in a GPU container, in words
	batch             batchSize
	nodeExclusive     bool
	nodeSelectorGPUs  uint64 // the pod's nodeSelector podshaper.io/gpu-count, 0 if none
}

func annotationError(key string, why any, hint string) error {
	return fmt.Errorf("annotation %s: %v; %s", key, why, hint)
}

type namedList struct {
	field string
	list  corev1.ResourceList
}

// containerGPUs is a container's nvidia.com/gpu: limits (where the device plugin
// requires it), else requests.
func containerGPUs(c *corev1.Container) (uint64, error) {
	for _, l := range []namedList{{"limits", c.Resources.Limits}, {"requests", c.Resources.Requests}} {
		q, ok := l.list[gpuResource]
		if !ok {
			continue
		}
		n, exact := q.AsInt64()
		if !exact || n < 0 {
			return 0, fmt.Errorf("container %q: resources.%s[%s] %q is not a non-negative integer", c.Name, l.field, gpuResource, q.String())
		}
		return uint64(n), nil
	}
	return 0, nil
}

// ownShmVolume is the container's own volume at /dev/shm, the path compared as the
// runtime resolves it ("/dev//shm", "/dev/shm/." and "dev/shm" are /dev/shm too).
func ownShmVolume(c *corev1.Container) string {
	for _, m := range c.VolumeMounts {
		if path.Clean("/"+m.MountPath) == shmMountPath {
			return m.Name
		}
	}
	return ""
}

func countAnnotation(pod *corev1.Pod, key string, fallback, minimum uint64, hint string) (uint64, error) {
	text, ok := pod.Annotations[key]
	if !ok {
		return fallback, nil
	}
	v, err := parseCount(text)
	if err != nil {
		return 0, annotationError(key, err, hint)
	}
	if v < minimum {
		return 0, annotationError(key, fmt.Sprintf("%q must be at least %d", text, minimum), hint)
	}
	return v, nil
}

// quantityBytes reads a non-negative quantity as whole bytes, rounding a fraction up.
func quantityBytes(q resource.Quantity) (uint64, error) {
	if q.Sign() < 0 {
		return 0, fmt.Errorf("%q is negative", q.String())
	}
	if q.Cmp(*resource.NewQuantity(math.MaxInt64, resource.DecimalSI)) > 0 {
		return 0, fmt.Errorf("%q is too large", q.String())
	}
	return uint64(q.Value()), nil
}

func readBatch(pod *corev1.Pod) (batchSize, error) {
	bytes, hasBytes := pod.Annotations[annBatchBytes]
	shape, hasShape := pod.Annotations[annBatchShape]
	dtype, hasDtype := pod.Annotations[annBatchDtype]
	both := fmt.Sprintf("set %s (e.g. 18Mi) or %s with %s (e.g. 32x3x224x224 and float32)", annBatchBytes, annBatchShape, annBatchDtype)
	switch {
	case hasBytes && hasShape:
		return batchSize{}, fmt.Errorf("annotations %s and %s are both set; keep only one", annBatchBytes, annBatchShape)
	case hasBytes:
		q, err := resource.ParseQuantity(bytes)
		if err != nil {
			return batchSize{}, annotationError(annBatchBytes, fmt.Sprintf("%q is not a quantity (examples: 18Mi, 1.5Gi, 19267584)", bytes), both)
		}
		n, err := quantityBytes(q)
		if err != nil {
			return batchSize{}, annotationError(annBatchBytes, err, both)
		}
		if n == 0 {
			return batchSize{}, annotationError(annBatchBytes, fmt.Sprintf("%q is zero", bytes), both)
		}
		return batchSize{bytes: n, source: "batch-bytes " + bytes}, nil
	case hasShape:
		if !hasDtype {
			dtype = "float32"
		}
		n, err := shapeBytes(shape, dtype)
		if err != nil {
			key := annBatchShape
			if _, dtypeErr := dtypeBytes(dtype); dtypeErr != nil {
				key = annBatchDtype
			}
			return batchSize{}, annotationError(key, err, both)
		}
		return batchSize{bytes: n, source: shape + " " + dtype}, nil
	}
	return batchSize{}, fmt.Errorf("the pod does not say how large a DataLoader batch is: %s", both)
}

func (s *PodShaper) readInputs(pod *corev1.Pod) (podInputs, error) {
	in := podInputs{nodeExclusive: true}
	if len(pod.Spec.Containers) == 0 {
		return in, fmt.Errorf("the object is not a Pod: spec.containers is missing")
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		gpus, err := containerGPUs(c)
		if err != nil {
			return in, err
		}
		if gpus == 0 {
			continue
		}
		if len(in.containers) == maxGPUContainers {
			return in, fmt.Errorf("container %s is GPU container %d of the pod; podshaper shapes at most %d (each holds a GPU of the one node the pod runs on): put the GPUs in fewer containers",
				quoted(c.Name, 100), maxGPUContainers+1, maxGPUContainers)
		}
		podGPUs, ok := add(in.podGPUs, gpus)
		if !ok {
			return in, fmt.Errorf("container %s: %s %d takes the pod's GPUs past 64 bits", quoted(c.Name, 100), gpuResource, gpus)
		}
		if len(in.containers) == 0 {
			in.span = readJobSpan(c)
		} else {
			in.span = combineJobSpans(in.span, readJobSpan(c))
		}
		if in.p2pOff == "" {
			in.p2pOff = readP2POff(c)
		}
		in.containers = append(in.containers, gpuContainer{index: i, gpus: gpus, ownShmVol: ownShmVolume(c)})
		in.podGPUs = podGPUs
	}
	if len(in.containers) == 0 {
		return in, nil
	}

	var err error
	if in.workers, err = countAnnotation(pod, annWorkers, s.Config.Defaults.Workers, 0,
		`set it to the DataLoader's num_workers, e.g. "8"`); err != nil {
		return in, err
	}
	if in.prefetch, err = countAnnotation(pod, annPrefetch, s.Config.Defaults.PrefetchFactor, 1,
		`set it to the DataLoader's prefetch_factor, e.g. "2"`); err != nil {
		return in, err
	}
	if text, ok := pod.Annotations[annRanks]; ok {
		const hint = `set it to the training processes in the pod, e.g. "8"`
		v, err := parseCount(text)
		if err != nil {
			return in, annotationError(annRanks, err, hint)
		}
		if v == 0 {
			return in, annotationError(annRanks, `"0" must be at least 1`, hint)
		}
		in.ranks = v
	}
	_, communicatorsSet := pod.Annotations[annNCCLCommunicators]
	if in.communicators, err = countAnnotation(pod, annNCCLCommunicators, s.Config.Defaults.NCCLCommunicators, 0,
		`set it to the process groups each rank makes (1 for DDP, 3 for a data × tensor parallel mesh), or "0" for a pod that runs no NCCL`); err != nil {
		return in, err
	}
	in.communicatorsFrom = "config defaults.ncclCommunicators"
	if communicatorsSet {
		in.communicatorsFrom = annNCCLCommunicators
	}
	// With no workers no batch goes through /dev/shm: its size is needed only when given.
	_, hasBytes := pod.Annotations[annBatchBytes]
	_, hasShape := pod.Annotations[annBatchShape]
	if in.workers == 0 && !hasBytes && !hasShape {
		in.batch = batchSize{source: "not needed with 0 workers"}
	} else if in.batch, err = readBatch(pod); err != nil {
		return in, err
	}
	if placement, ok := pod.Annotations[annPlacement]; ok {
		switch placement {
		case shared:
			in.nodeExclusive = false
		case nodeExclusive:
		default:
			return in, annotationError(annPlacement, fmt.Sprintf("%q is not a placement", placement), "use node-exclusive or shared")
		}
	}
	// The scheduler compares label values as strings: "08" matches no node the operator
	// labelled "8", so only the count as the operator writes it is read as one.
	if g, ok := pod.Spec.NodeSelector[labelGPUCount]; ok {
		v, err := parseCount(g)
		if err != nil || v == 0 || strconv.FormatUint(v, 10) != g {
			return in, fmt.Errorf("nodeSelector %s: %s matches no node podshaper labels; it writes the GPU count in decimal with no sign or leading zeros, e.g. \"8\"",
				labelGPUCount, quoted(g, 64))
		}
		in.nodeSelectorGPUs = v
	}
	return in, nil
}

// shareOf is a container's share of bytes, by its GPUs out of of, in whole MiB.
func shareOf(bytes, gpus, of uint64) uint64 {
	share, ok := mulDivCeil(bytes, gpus, of)
	if !ok {
		share = bytes
	}
	return ceilMiB(share) * miB
}

func (s *PodShaper) shape(ctx context.Context, pod *corev1.Pod) error {
	if err := checkPodSize(pod); err != nil {
		return err
	}
	ownBytes := annotationsBytes(pod.Annotations)
	in, err := s.readInputs(pod)
	if err != nil {
		return err
	}
	if len(in.containers) == 0 {
		return nil // not a GPU pod: left as it is
	}
	cfg := &s.Config

	// G, the GPUs of the pod's node class: its nodeSelector, else the config (no cluster view).
	G, gSource := cfg.Defaults.GPUsPerNode, "from config defaults.gpusPerNode"
	if in.nodeSelectorGPUs != 0 {
		G, gSource = in.nodeSelectorGPUs, "from the pod's nodeSelector "+labelGPUCount
	}
	expanded := false
	if in.nodeExclusive && in.podGPUs > G {
		return fmt.Errorf("the pod asks %d %s but nodes of its class have %d (%s): split the job into pods of %d GPUs each",
			in.podGPUs, gpuResource, G, gSource, G)
	}
	if in.nodeExclusive && in.podGPUs < G {
		asks := fmt.Sprintf("the pod asks %d %s but node-exclusive pods own whole %d-GPU nodes (%s)", in.podGPUs, gpuResource, G, gSource)
		switch cfg.PartialNode {
		case "deny":
			return fmt.Errorf("%s: request %d GPUs (one rank per GPU), or set %s: shared to share the node", asks, G, annPlacement)
		case "expand": // the extra GPUs go to the first GPU container; its ranks follow
			in.containers[0].gpus += G - in.podGPUs
			in.podGPUs = G
			expanded = true
		}
	}
	ranks := in.ranks
	if ranks == 0 {
		ranks = in.podGPUs
	}

	// NCCL's segments per rank per communicator, by the transport the ranks will use.
	// Without a cluster view P2P between all GPU pairs is unknown: NCCL may use its SHM
	// transport between the pod's ranks.
	costs := &cfg.NCCLShmPerCommunicator
	nccl := planNcclReserve(ncclReserveInputs{
		ranks: ranks, communicators: in.communicators, communicatorsFrom: in.communicatorsFrom, span: in.span,
		costs:  ncclShmCosts{net: uint64(costs.NET.Value()), p2p: uint64(costs.P2P.Value()), shm: uint64(costs.SHM.Value())},
		p2pOff: in.p2pOff,
	})
	plan, err := planShm(shmInputs{
		ranks: ranks, workers: in.workers, prefetch: in.prefetch, batch: in.batch,
		headroomPercent: cfg.Defaults.HeadroomPercent, nccl: nccl,
	})
	if err != nil {
		return err
	}
	if cfg.Defaults.NodeMemory != nil {
		nodeMemory := uint64(cfg.Defaults.NodeMemory.Value())
		if capBytes, ok := mul(nodeMemory, cfg.Limits.MaxShmPercentOfNodeMemory); ok && plan.bytes > capBytes/100 {
			return fmt.Errorf("/dev/shm would be %s, above limits.maxShmPercentOfNodeMemory (%d%%) of the node's %s: lower %s, %s, the batch size or %s (%s)",
				formatBytes(plan.bytes), cfg.Limits.MaxShmPercentOfNodeMemory, formatBytes(nodeMemory), annWorkers, annPrefetch,
				annNCCLCommunicators, plan.formula)
		}
	}
	// podshaper's volume is sized for the containers that mount it: the pod's size when
	// every GPU container does, else their share of it (docs/webhook.md "Several GPU containers").
	var volumeGPUs uint64
	for _, gc := range in.containers {
		if gc.ownShmVol == "" {
			volumeGPUs += gc.gpus
		}
	}
	partialVolume := volumeGPUs > 0 && volumeGPUs < in.podGPUs
	volume := plan.bytes
	if partialVolume {
		volume = max(minShm, shareOf(plan.bytes, volumeGPUs, in.podGPUs))
	}
	if volumeGPUs > 0 && slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == shmVolume }) {
		return fmt.Errorf("spec.volumes has a volume named %q, the name of the /dev/shm volume podshaper adds: rename it", shmVolume)
	}
	shmSize := resource.NewQuantity(int64(volume), resource.BinarySI)
	written := []string{annShmSize, annShmFormula, annShapedBy}

	needVolume := false
	for i, gc := range in.containers {
		c := &pod.Spec.Containers[gc.index]
		if expanded && i == 0 {
			gpus := resource.NewQuantity(int64(gc.gpus), resource.DecimalSI)
			if c.Resources.Limits == nil {
				c.Resources.Limits = corev1.ResourceList{}
			}
			c.Resources.Limits[gpuResource] = *gpus
			if _, ok := c.Resources.Requests[gpuResource]; ok {
				c.Resources.Requests[gpuResource] = *gpus
			}
		}
		if gc.ownShmVol != "" {
			logOwnShm(ctx, pod, c, gc.ownShmVol, shareOf(plan.bytes, gc.gpus, in.podGPUs))
		} else {
			needVolume = true
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: shmVolume, MountPath: shmMountPath})
			// The memory-backed emptyDir counts against the memory limit: pay for this
			// container's share of it (its GPUs out of the volume's), rounded up to MiB.
			share := shareOf(volume, gc.gpus, volumeGPUs)
			for _, l := range []namedList{{"limits", c.Resources.Limits}, {"requests", c.Resources.Requests}} {
				current, ok := l.list[corev1.ResourceMemory]
				if !ok {
					continue
				}
				what := fmt.Sprintf("container %q resources.%s.memory", c.Name, l.field)
				have, err := quantityBytes(current)
				if err != nil {
					return fmt.Errorf("%s %v", what, err)
				}
				raised, ok := add(have, share)
				if !ok || raised > math.MaxInt64 {
					return fmt.Errorf("%s overflows", what)
				}
				l.list[corev1.ResourceMemory] = *resource.NewQuantity(int64(raised), resource.BinarySI)
			}
		}
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		if c.SecurityContext.Capabilities == nil {
			c.SecurityContext.Capabilities = &corev1.Capabilities{}
		}
		if !slices.Contains(c.SecurityContext.Capabilities.Add, ipcLock) {
			c.SecurityContext.Capabilities.Add = append(c.SecurityContext.Capabilities.Add, ipcLock)
		}
		if key := setMemlock(ctx, pod, c.Name, memlockEntry(cfg)); key != "" {
			written = append(written, key)
		}
		// The log's tail as the termination message (File is what the API server defaults).
		if c.TerminationMessagePolicy == "" || c.TerminationMessagePolicy == corev1.TerminationMessageReadFile {
			c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		}

		// torchrun in each container starts its share of the pod's ranks.
		nprocs, ok := mulDivCeil(ranks, gc.gpus, in.podGPUs)
		if !ok {
			nprocs = ranks
		}
		value := strconv.FormatUint(nprocs, 10)
		if j := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == nprocEnv }); j < 0 {
			c.Env = append(c.Env, corev1.EnvVar{Name: nprocEnv, Value: value})
		} else if expanded && i == 0 {
			c.Env[j].Value = value
		}
	}
	if needVolume {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name: shmVolume,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: shmSize,
			}},
		})
	}
	pod.Spec.HostIPC = true

	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if in.nodeExclusive {
		requireOnePodPerNode(pod)
	}
	if err := checkNodeAffinitySize(pod); err != nil {
		return err
	}
	// A node that grants the memlock asked: unlimited, or (for a number of bytes)
	// unlimited or at least that many, one nodeSelectorTerm each.
	var alternatives [][]corev1.NodeSelectorRequirement
	for _, memlock := range memlockRequirements(cfg) {
		requirements := []corev1.NodeSelectorRequirement{inRequirement(labelTopologyValidated, "true"), memlock}
		if in.nodeExclusive {
			requirements = append(requirements, inRequirement(labelGPUCount, strconv.FormatUint(G, 10)))
		}
		alternatives = append(alternatives, requirements)
	}
	requireNodeLabels(pod.Spec.Affinity, alternatives)

	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[annShmSize] = shmSize.String()
	pod.Annotations[annShmFormula] = plan.formula
	if partialVolume {
		pod.Annotations[annShmFormula] += fmt.Sprintf("; podshaper's /dev/shm serves the containers holding %d of the pod's %d GPUs (the others mount their own): %s",
			volumeGPUs, in.podGPUs, formatBytes(volume))
	}
	pod.Annotations[annShapedBy] = s.ShapedBy
	// podshaper.io/warnings is podshaper's own (it keeps nothing a user wrote under that
	// name); the peer has no admission warnings to write there.
	delete(pod.Annotations, annWarnings)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[labelShaped] = "true"
	return fitAnnotations(pod, ownBytes, written)
}

func inRequirement(key, value string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}
}

// memlockRequirements are the node labels that grant the memlock asked: unlimited, or
// a number of bytes at least the one asked (Gt one less).
func memlockRequirements(cfg *Config) []corev1.NodeSelectorRequirement {
	out := []corev1.NodeSelectorRequirement{inRequirement(labelMemlock, "unlimited")}
	if cfg.memlockBytes != 0 {
		out = append(out, corev1.NodeSelectorRequirement{Key: labelMemlock, Operator: corev1.NodeSelectorOpGt,
			Values: []string{strconv.FormatUint(cfg.memlockBytes-1, 10)}})
	}
	return out
}

// memlockEntry is the one RLIMIT_MEMLOCK entry of a ulimit list, a block list item at column 0.
func memlockEntry(cfg *Config) string {
	value := rlimInfinity
	if cfg.memlockBytes != 0 {
		value = strconv.FormatUint(cfg.memlockBytes, 10)
	}
	return "- type: RLIMIT_MEMLOCK\n  soft: " + value + "\n  hard: " + value + "\n"
}

// requireOnePodPerNode labels the pod node-exclusive and keeps every other such pod,
// of any namespace, off its node.
func requireOnePodPerNode(pod *corev1.Pod) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[labelPlacement] = nodeExclusive
	term := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: labelPlacement, Operator: metav1.LabelSelectorOpIn, Values: []string{nodeExclusive}},
		}},
		TopologyKey: labelHostname,
		// Without it the term would only see pods of this pod's own namespace.
		NamespaceSelector: &metav1.LabelSelector{},
	}
	a := pod.Spec.Affinity
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	terms := &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if !slices.ContainsFunc(*terms, func(t corev1.PodAffinityTerm) bool { return equality.Semantic.DeepEqual(t, term) }) {
		*terms = append(*terms, term)
	}
}

// requireNodeLabels makes each nodeSelectorTerm (terms are ORed, expressions within one
// ANDed; none is one empty term) into one term per alternative, with its requirements
// added; a term that already holds every requirement of one alternative (a shaped pod's
// manifest) is kept as it is.
func requireNodeLabels(a *corev1.Affinity, alternatives [][]corev1.NodeSelectorRequirement) {
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	if a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	required := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(required.NodeSelectorTerms) == 0 {
		required.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	has := func(list []corev1.NodeSelectorRequirement, r corev1.NodeSelectorRequirement) bool {
		return slices.ContainsFunc(list, func(e corev1.NodeSelectorRequirement) bool { return equality.Semantic.DeepEqual(e, r) })
	}
	holds := func(term *corev1.NodeSelectorTerm, requirements []corev1.NodeSelectorRequirement) bool {
		return !slices.ContainsFunc(requirements, func(r corev1.NodeSelectorRequirement) bool {
			return !has(term.MatchExpressions, r)
		})
	}
	shaped := make([]corev1.NodeSelectorTerm, 0, len(required.NodeSelectorTerms)*len(alternatives))
	for i := range required.NodeSelectorTerms {
		if slices.ContainsFunc(alternatives, func(a []corev1.NodeSelectorRequirement) bool {
			return holds(&required.NodeSelectorTerms[i], a)
		}) {
			shaped = append(shaped, required.NodeSelectorTerms[i])
			continue
		}
		for _, requirements := range alternatives {
			term := *required.NodeSelectorTerms[i].DeepCopy()
			for _, r := range requirements {
				if !has(term.MatchExpressions, r) {
					term.MatchExpressions = append(term.MatchExpressions, r)
				}
			}
			shaped = append(shaped, term)
		}
	}
	required.NodeSelectorTerms = shaped
}

// setMemlock asks the NRI ulimit-adjuster for the config's RLIMIT_MEMLOCK (entry) in the
// container. A user's own ulimit annotation gains the entry, or is kept if it already sets
// memlock. Returns the annotation it wrote, or "".
func setMemlock(ctx context.Context, pod *corev1.Pod, container, memlockEntry string) string {
	if len("container.")+len(container) > 63 {
		logf.FromContext(ctx).Info("container name too long for the NRI ulimit annotation key; memlock left to the runtime default", "container", container)
		return ""
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for _, prefix := range []string{ulimitPrefix, ulimitDeprecatedPrefix} {
		key := prefix + container
		value, ok := pod.Annotations[key]
		if !ok {
			continue
		}
		var ulimits any
		list, isList := []any(nil), false
		if err := yaml.Unmarshal([]byte(value), &ulimits); err == nil {
			list, isList = ulimits.([]any)
		}
		if !isList {
			logf.FromContext(ctx).Info("ulimit annotation is not a list of ulimits; left as it is, memlock not set", "annotation", key)
			return ""
		}
		for _, item := range list {
			if m, ok := item.(map[string]any); ok && isMemlock(m["type"]) {
				return "" // the user chose a memlock limit: theirs to keep
			}
		}
		if value != "" && !strings.HasSuffix(value, "\n") {
			value += "\n"
		}
		pod.Annotations[key] = value + memlockEntry
		return key
	}
	pod.Annotations[ulimitPrefix+container] = memlockEntry
	return ulimitPrefix + container
}

func isMemlock(t any) bool {
	name, ok := t.(string)
	if !ok {
		return false
	}
	name = strings.ToLower(name)
	return strings.TrimPrefix(name, "rlimit_") == "memlock"
}

// logOwnShm says when a container's own /dev/shm volume is smaller than its share of the
// pod's /dev/shm (it is kept).
func logOwnShm(ctx context.Context, pod *corev1.Pod, c *corev1.Container, volume string, need uint64) {
	for _, v := range pod.Spec.Volumes {
		if v.Name != volume {
			continue
		}
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && uint64(v.EmptyDir.SizeLimit.Value()) < need {
			logf.FromContext(ctx).Info("container keeps its own /dev/shm volume, smaller than its ranks need",
				"container", c.Name, "volume", volume, "sizeLimit", v.EmptyDir.SizeLimit.String(), "need", formatBytes(need))
		}
		return
	}
}
