package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// netReserve is one NCCL reserve over NET of communicators × bytes per rank.
func netReserve(bytes, communicators uint64) ncclReserve {
	return ncclReserve{communicators: communicators, communicatorsFrom: "config defaults.ncclCommunicators",
		perCommunicatorBytes: bytes, transport: "NET", why: "because"}
}

// The seed: 8 ranks, 8 workers, prefetch 4, 32x3x224x224 float32 → 6008Mi, 8231Mi with
// the NCCL reserve of 8 ranks × 4 communicators × 71108Ki (SHM: no P2P known).
func TestSeedShm(t *testing.T) {
	batch, err := shapeBytes("32x3x224x224", "float32")
	if err != nil || batch != 19267584 {
		t.Fatalf("batch = %d, %v", batch, err)
	}
	in := shmInputs{ranks: 8, workers: 8, prefetch: 4, headroomPercent: 20,
		batch: batchSize{bytes: batch, source: "32x3x224x224 float32"}}
	seedSHM := planNcclReserve(ncclReserveInputs{ranks: 8, communicators: 4,
		communicatorsFrom: "config defaults.ncclCommunicators",
		span:              jobSpan{spanManyNodes, `torchrun --nnodes=2 in container "trainer"`},
		costs:             ncclShmCosts{net: 34213888, shm: 72814592}})
	for _, tc := range []struct {
		nccl ncclReserve
		want string
	}{{ncclReserve{}, "6008Mi"}, {seedSHM, "8231Mi"}} {
		in.nccl = tc.nccl
		plan, err := planShm(in)
		if err != nil || formatBytes(plan.bytes) != tc.want {
			t.Fatalf("reserve %+v: shm = %s, %v; want %s", tc.nccl, formatBytes(plan.bytes), err, tc.want)
		}
	}
	want := "8 ranks × ((8 workers × prefetch 4 + 2 held: the batch being handed over and the one in the training step) × " +
		"19267584 B (32x3x224x224 float32) + 1Mi for the DataLoader's semaphores) = 5249171456 B; " +
		"+20% headroom = 6299005748 B → 6008Mi; + NCCL reserve 8 ranks × 4 communicators (config defaults.ncclCommunicators) × " +
		"71108Ki per rank per communicator = 2223Mi (SHM: P2P between all GPU pairs is not known to hold on the nodes the pod may land on, " +
		"so NCCL may use its SHM transport between the pod's ranks, with its proxy pool and receive buffers in /dev/shm " +
		"(sized as if its cuMem host memory were refused, as a RuntimeDefault seccomp profile refuses it): " +
		"config ncclShmPerCommunicator.shm); /dev/shm = 8231Mi"
	if plan, _ := planShm(in); plan.formula != want {
		t.Errorf("formula\n got %s\nwant %s", plan.formula, want)
	}
	in.nccl = ncclReserve{}
	if plan, _ := planShm(in); !strings.Contains(plan.formula, "→ 6008Mi; no NCCL reserve; /dev/shm = 6008Mi") {
		t.Errorf("formula without NCCL: %s", plan.formula)
	}
}

// podshaper's Shm.TheFormulaSaysWhichReserveAndWhy.
func TestTheFormulaSaysWhichReserveAndWhy(t *testing.T) {
	plan, err := planShm(shmInputs{ranks: 2, workers: 2, prefetch: 2, batch: batchSize{32 * miB, "batch-bytes 32Mi"},
		nccl: netReserve(32*miB, 2)})
	want := "2 ranks × ((2 workers × prefetch 2 + 2 held: the batch being handed over and the one in the training " +
		"step) × 33554432 B (batch-bytes 32Mi) + 1Mi for the DataLoader's semaphores) = 404750336 B; +0% " +
		"headroom = 404750336 B → 386Mi; + NCCL reserve 2 ranks × 2 communicators (config " +
		"defaults.ncclCommunicators) × 32Mi per rank per communicator = 128Mi (because); /dev/shm = 514Mi"
	if err != nil || plan.formula != want {
		t.Errorf("formula %v\n got %s\nwant %s", err, plan.formula, want)
	}
}

// podshaper's ShmTable.
func TestShmTable(t *testing.T) {
	const maxU = ^uint64(0)
	for _, tc := range []struct {
		name   string
		in     shmInputs
		wantMi uint64 // 0: an overflow error
	}{
		{"one rank with NCCL reserve", shmInputs{1, 4, 2, batchSize{miB, "1Mi"}, 20, netReserve(64*miB, 1)}, 14 + 64},
		{"no workers and no reserve is the floor", shmInputs{2, 0, 2, batchSize{miB, "1Mi"}, 0, ncclReserve{}}, 64},
		{"no workers is the reserve alone", shmInputs{2, 0, 2, batchSize{miB, "1Mi"}, 0, netReserve(100*miB, 1)}, 200},
		{"reserve not a MiB multiple rounds up", shmInputs{3, 1, 1, batchSize{32 * miB, "32Mi"}, 0, netReserve(1000, 1)}, 291 + 1},
		{"8 ranks reserve", shmInputs{8, 8, 4, batchSize{19267584, "seed"}, 20, netReserve(64*miB, 1)}, 6008 + 512},
		{"overflow beyond int64 total", shmInputs{1, 0, 1, batchSize{1, "x"}, 0, netReserve(1<<63, 1)}, 0},
		{"overflow in reserve", shmInputs{maxU, 0, 1, batchSize{1, "x"}, 0, netReserve(2, 1)}, 0},
		{"overflow in ranks × communicators", shmInputs{1 << 40, 0, 1, batchSize{1, "x"}, 0, netReserve(1, 1<<40)}, 0},
		{"overflow in communicators × bytes", shmInputs{1, 0, 1, batchSize{1, "x"}, 0, netReserve(1<<40, 1<<40)}, 0},
		{"the note's job over NET, 6 communicators",
			shmInputs{2, 3, 2, batchSize{9633792, "16x3x224x224 float32"}, 0, netReserve(34213888, 6)}, 149 + 392},
	} {
		plan, err := planShm(tc.in)
		switch {
		case tc.wantMi == 0 && err == nil:
			t.Errorf("%s: no overflow error (%s)", tc.name, formatBytes(plan.bytes))
		case tc.wantMi != 0 && (err != nil || plan.bytes != tc.wantMi*miB):
			t.Errorf("%s: shm = %s, %v; want %dMi", tc.name, formatBytes(plan.bytes), err, tc.wantMi)
		}
	}
	_, err := planShm(shmInputs{ranks: 8, nccl: netReserve(1, maxU)})
	if want := "the /dev/shm size overflows 64 bits at the NCCL reserve; check podshaper.io/nccl-communicators and the ranks"; err == nil || err.Error() != want {
		t.Errorf("overflow: %v; want %s", err, want)
	}
}

func TestOverflowIsAnError(t *testing.T) {
	if _, err := planShm(shmInputs{ranks: 8, workers: 1 << 40, prefetch: 1 << 30, batch: batchSize{bytes: 1}}); err == nil {
		t.Error("no overflow error")
	}
	if q, ok := mulDivCeil(1<<63, 4, 8); !ok || q != 1<<62 {
		t.Errorf("mulDivCeil = %d, %v", q, ok)
	}
}

func TestNoWorkersIsTheFloor(t *testing.T) {
	plan, err := planShm(shmInputs{ranks: 4, workers: 0, prefetch: 2, batch: batchSize{bytes: 32 * miB}})
	if err != nil || plan.bytes != 64*miB {
		t.Fatalf("shm = %d, %v; want 64Mi", plan.bytes, err)
	}
}

func TestReadJobSpan(t *testing.T) {
	env := func(value string) []corev1.EnvVar { return []corev1.EnvVar{{Name: "PET_NNODES", Value: value}} }
	for _, tc := range []struct {
		c    corev1.Container
		kind spanKind
		src  string
	}{
		{corev1.Container{Name: "t"}, spanUnknown, `no torchrun --nnodes or PET_NNODES in container "t"`},
		{corev1.Container{Name: "t", Env: env("1")}, spanOneNode, `PET_NNODES=1 in container "t"`},
		{corev1.Container{Name: "t", Env: env("4")}, spanManyNodes, `PET_NNODES=4 in container "t"`},
		{corev1.Container{Name: "t", Env: env("1:4")}, spanManyNodes, `PET_NNODES=1:4 in container "t"`},
		{corev1.Container{Name: "t", Env: env("$(NNODES)")}, spanUnknown, `PET_NNODES=$(NNODES) in container "t" is not a node count`},
		{corev1.Container{Name: "t", Env: env("0")}, spanUnknown, `PET_NNODES=0 in container "t" is not a node count`},
		{corev1.Container{Name: "t", Env: []corev1.EnvVar{{Name: "PET_NNODES", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['n']"}}}}},
			spanUnknown, `PET_NNODES from valueFrom in container "t"`},
		// torchrun's own flags win over the environment, as in torchrun.
		{corev1.Container{Name: "t", Env: env("4"), Command: []string{"torchrun", "--standalone", "--nproc-per-node=8", "train.py"}},
			spanOneNode, `torchrun --standalone in container "t"`},
		{corev1.Container{Name: "t", Env: env("4"), Command: []string{"bash", "-c"}, Args: []string{"torchrun\t--nnodes=1 train.py"}},
			spanOneNode, `torchrun --nnodes=1 in container "t"`},
		{corev1.Container{Name: "t", Env: env("4"), Command: []string{"torchrun", "--nnodes", "1:1", "train.py"}},
			spanOneNode, `torchrun --nnodes 1:1 in container "t"`},
		{corev1.Container{Name: "t", Env: env("1"), Args: []string{"--nnodes"}}, spanOneNode, `PET_NNODES=1 in container "t"`},
		{corev1.Container{Name: "t", Args: []string{"--nnodes=2:x"}}, spanUnknown, `torchrun --nnodes=2:x in container "t" is not a node count`},
	} {
		got := readJobSpan(&tc.c)
		if got.kind != tc.kind || got.source != tc.src {
			t.Errorf("%+v: got %+v, want {%d %s}", tc.c, got, tc.kind, tc.src)
		}
	}
	one, many, unknown := jobSpan{spanOneNode, "a"}, jobSpan{spanManyNodes, "b"}, jobSpan{spanUnknown, "c"}
	for _, tc := range []struct{ a, b, want jobSpan }{
		{one, one, one}, {one, many, many}, {many, unknown, many}, {unknown, many, many},
		{one, unknown, unknown}, {unknown, one, unknown}, {jobSpan{spanOneNode, "d"}, one, one},
	} {
		if got := combineJobSpans(tc.a, tc.b); got != tc.want {
			t.Errorf("combine(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestPlanNcclReserve(t *testing.T) {
	costs := ncclShmCosts{net: 34213888, p2p: 0, shm: 72814592}
	from := "config defaults.ncclCommunicators"
	oneNode := jobSpan{spanOneNode, `PET_NNODES=1 in container "trainer"`}
	for _, tc := range []struct {
		in        ncclReserveInputs
		transport string
		bytes     uint64
		why       string
	}{
		{ncclReserveInputs{8, 0, "podshaper.io/nccl-communicators", oneNode, false, costs, ""}, "", 0,
			"podshaper.io/nccl-communicators is 0: the pod runs no NCCL"},
		{ncclReserveInputs{1, 4, from, oneNode, false, costs, ""}, "", 0,
			`one rank on one node (PET_NNODES=1 in container "trainer"): NCCL connects to no peer`},
		{ncclReserveInputs{8, 4, from, oneNode, false, costs, ""}, "SHM", 72814592,
			`SHM on one node (PET_NNODES=1 in container "trainer"): P2P between all GPU pairs is not known to hold on ` +
				`the nodes the pod may land on, so NCCL may use its SHM transport between the pod's ranks, with its proxy pool and ` +
				`receive buffers in /dev/shm (sized as if its cuMem host memory were refused, as a RuntimeDefault seccomp ` +
				`profile refuses it): config ncclShmPerCommunicator.shm`},
		{ncclReserveInputs{8, 4, from, oneNode, true, costs, ""}, "P2P", 0,
			`P2P on one node (PET_NNODES=1 in container "trainer"): the pod's ranks read each other's GPUs directly ` +
				`(target nodes validated with P2P between all GPU pairs), and NCCL's P2P over cuMem keeps nothing in ` +
				`/dev/shm: config ncclShmPerCommunicator.p2p`},
		{ncclReserveInputs{8, 4, from, jobSpan{spanUnknown, `no torchrun --nnodes or PET_NNODES in container "trainer"`}, true, costs, ""},
			"NET", 34213888,
			`NET: the job may span nodes (no torchrun --nnodes or PET_NNODES in container "trainer"; set torchrun ` +
				`--nnodes or PET_NNODES to 1 for a one-node job), and NCCL's proxy keeps a pool per rank per ` +
				`communicator for its network connections: config ncclShmPerCommunicator.net`},
		{ncclReserveInputs{1, 4, from, jobSpan{spanManyNodes, `PET_NNODES=4 in container "trainer"`}, false, costs, ""},
			"NET", 34213888,
			`NET: the job spans nodes (PET_NNODES=4 in container "trainer"), and NCCL's proxy keeps a pool per rank ` +
				`per communicator for its network connections: config ncclShmPerCommunicator.net`},
		// The most costly transport wins; a tie keeps the first (NET).
		{ncclReserveInputs{8, 4, from, jobSpan{spanManyNodes, "x"}, false, costs, ""}, "SHM", 72814592, ""},
		{ncclReserveInputs{8, 4, from, jobSpan{spanManyNodes, "x"}, false, ncclShmCosts{net: 5, shm: 5}, ""}, "NET", 5, ""},
		{ncclReserveInputs{8, 4, from, jobSpan{spanManyNodes, "x"}, false, ncclShmCosts{net: 6, shm: 5}, ""}, "NET", 6, ""},
	} {
		r := planNcclReserve(tc.in)
		if r.transport != tc.transport || r.perCommunicatorBytes != tc.bytes || (tc.why != "" && r.why != tc.why) ||
			r.communicators != tc.in.communicators || r.communicatorsFrom != tc.in.communicatorsFrom {
			t.Errorf("%+v:\n got %+v\nwant %s %d %s", tc.in, r, tc.transport, tc.bytes, tc.why)
		}
	}
}

func trainingPod(annotations map[string]string) *corev1.Pod {
	ann := map[string]string{
		annWorkers: "8", annPrefetch: "4", annBatchShape: "32x3x224x224", annBatchDtype: "float32",
	}
	for k, v := range annotations {
		ann[k] = v
	}
	gpus := resource.MustParse("8")
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{labelInject: "true"}, Annotations: ann},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "trainer", Image: "x",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{gpuResource: gpus}},
		}}},
	}
}

func TestTheCommunicatorsAnnotation(t *testing.T) {
	s := &PodShaper{Config: DefaultConfig()}
	shape := func(pod *corev1.Pod) (string, string, error) {
		err := s.shape(context.Background(), pod)
		return pod.Annotations[annShmSize], pod.Annotations[annShmFormula], err
	}
	// No cluster view: P2P is unknown, so 8 ranks may use SHM (71108Ki), the costlier transport.
	if size, formula, err := shape(trainingPod(nil)); err != nil || size != "8231Mi" ||
		!strings.Contains(formula, "× 4 communicators (config defaults.ncclCommunicators) × 71108Ki per rank per communicator = 2223Mi (SHM: ") {
		t.Errorf("default: %s, %v: %s", size, err, formula)
	}
	if size, formula, err := shape(trainingPod(map[string]string{annNCCLCommunicators: "1"})); err != nil || size != "6564Mi" ||
		!strings.Contains(formula, "8 ranks × 1 communicator (podshaper.io/nccl-communicators) × 71108Ki") {
		t.Errorf("one: %s, %v: %s", size, err, formula)
	}
	if size, formula, err := shape(trainingPod(map[string]string{annNCCLCommunicators: "0"})); err != nil || size != "6008Mi" ||
		!strings.Contains(formula, "; no NCCL reserve (podshaper.io/nccl-communicators is 0: the pod runs no NCCL); /dev/shm = 6008Mi") {
		t.Errorf("zero: %s, %v: %s", size, err, formula)
	}
	for _, bad := range []string{"-1", "four", "1.5", "", "99999999999999999999999"} {
		_, _, err := shape(trainingPod(map[string]string{annNCCLCommunicators: bad}))
		if err == nil || !strings.HasPrefix(err.Error(), "annotation podshaper.io/nccl-communicators: ") ||
			!strings.HasSuffix(err.Error(), `; set it to the process groups each rank makes (1 for DDP, 3 for a data × tensor parallel mesh), or "0" for a pod that runs no NCCL`) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// Checked after the ranks, before the batch size.
	pod := trainingPod(map[string]string{annNCCLCommunicators: "x", annRanks: "0"})
	if _, _, err := shape(pod); err == nil || !strings.Contains(err.Error(), annRanks) {
		t.Errorf("ranks first: %v", err)
	}
	pod = trainingPod(map[string]string{annNCCLCommunicators: "x"})
	delete(pod.Annotations, annBatchShape)
	if _, _, err := shape(pod); err == nil || !strings.Contains(err.Error(), annNCCLCommunicators) {
		t.Errorf("before the batch: %v", err)
	}
	_, _, err := shape(trainingPod(map[string]string{annNCCLCommunicators: "18446744073709551615"}))
	if err == nil || !strings.Contains(err.Error(), "overflows 64 bits at the NCCL reserve; check podshaper.io/nccl-communicators and the ranks") {
		t.Errorf("overflow: %v", err)
	}
	// One node (torchrun --standalone) with one rank: no peer.
	one := trainingPod(map[string]string{annPlacement: "shared", annRanks: "1"})
	one.Spec.Containers[0].Command = []string{"torchrun", "--standalone", "train.py"}
	if size, formula, err := shape(one); err != nil || size != "751Mi" ||
		!strings.Contains(formula, `; no NCCL reserve (one rank on one node (torchrun --standalone in container "trainer"): NCCL connects to no peer)`) {
		t.Errorf("alone: %s, %v: %s", size, err, formula)
	}
	// The cap names the annotation.
	capped := &PodShaper{Config: DefaultConfig()}
	nodeMemory := resource.MustParse("8Gi")
	capped.Config.Defaults.NodeMemory = &nodeMemory
	err = capped.shape(context.Background(), trainingPod(nil))
	if err == nil || !strings.Contains(err.Error(), "of the node's 8Gi: lower podshaper.io/dataloader-workers, "+
		"podshaper.io/prefetch-factor, the batch size or podshaper.io/nccl-communicators (8 ranks × ") {
		t.Errorf("cap: %v", err)
	}
}

// The default config's hash is podshaper's (tests/golden's shaped-by), so both name it alike.
func TestDefaultConfigHashIsPodshapers(t *testing.T) {
	cfg := DefaultConfig()
	if got := cfg.Hash(); got != "35ac15f87c8d0dc9" {
		t.Errorf("Hash() = %s, want podshaper's 35ac15f87c8d0dc9", got)
	}
}

// configLoader loads config text written to a file of the test's own.
func configLoader(t *testing.T) func(string) (Config, error) {
	dir := t.TempDir()
	return func(text string) (Config, error) {
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadConfig(path)
	}
}

func TestConfigKeys(t *testing.T) {
	load := configLoader(t)
	cfg, err := load("defaults:\n  ncclCommunicators: 0\nncclShmPerCommunicator:\n  net: 31108Ki\n  p2p: 32260Ki\n  shm: 96Mi\n")
	if err != nil || cfg.Defaults.NCCLCommunicators != 0 || cfg.NCCLShmPerCommunicator.NET.Value() != 31108*1024 ||
		cfg.NCCLShmPerCommunicator.P2P.Value() != 32260*1024 || cfg.NCCLShmPerCommunicator.SHM.Value() != 96*miB {
		t.Errorf("%+v, %v", cfg, err)
	}
	def := DefaultConfig()
	for _, text := range []string{"defaults:\n  ncclCommunicators: 3\n", "ncclShmPerCommunicator:\n  net: 32260Ki\n"} {
		if c, err := load(text); err != nil || c.Hash() == def.Hash() {
			t.Errorf("%q: hash %s, %v", text, c.Hash(), err)
		}
	}
	p2p, _ := load("ncclShmPerCommunicator:\n  p2p: 1Mi\n")
	shm, _ := load("ncclShmPerCommunicator:\n  shm: 1Mi\n")
	if p2p.Hash() == shm.Hash() {
		t.Error("p2p and shm hash alike")
	}
	for text, want := range map[string]string{
		"defaults:\n  ncclShmReservePerRank: 128Mi\n": "config: defaults.ncclShmReservePerRank: replaced by defaults.ncclCommunicators " +
			"and ncclShmPerCommunicator (net, p2p, shm): NCCL's /dev/shm is per rank per communicator, by transport (docs/webhook.md)",
		"defaults:\n  ncclShmReservePerRankWithP2P:\n": "config: defaults.ncclShmReservePerRankWithP2P: replaced by",
		"defaults:\n  ncclCommunicators: 1025\n":       "config: defaults.ncclCommunicators: 1025 is out of range 0..1024",
		"ncclShmPerCommunicator:\n  shm: -64Mi\n":      "config: ncclShmPerCommunicator.shm: ",
		"ncclShmPerCommunicator:\n  nvls: 64Mi\n":      "nvls",
	} {
		if _, err := load(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %s", text, err, want)
		}
	}
}

// config memlock: the ulimit entry asks it, and the node terms double (unlimited, or at
// least the bytes asked); the hash is podshaper's (tests/golden's memlock-4mi cases).
func TestMemlockConfig(t *testing.T) {
	load := configLoader(t)
	cfg, err := load("memlock: 4Mi\n")
	if err != nil || cfg.MemlockText() != "4194304" || cfg.Hash() != "55616714290f44f1" {
		t.Fatalf("memlock 4Mi: %s %s, %v; want 4194304 and podshaper's hash 55616714290f44f1", cfg.MemlockText(), cfg.Hash(), err)
	}
	if same, err := load("memlock: 4194304\n"); err != nil || same.Hash() != cfg.Hash() {
		t.Errorf("memlock 4194304: %s, %v", same.Hash(), err)
	}
	if unlimited, err := load("memlock: unlimited\n"); err != nil || unlimited.Hash() != "35ac15f87c8d0dc9" {
		t.Errorf("memlock unlimited: %s, %v", unlimited.Hash(), err)
	}
	for text, want := range map[string]string{
		"memlock: 0\n":    `config: memlock: "0" is zero: a locked-memory limit is at least 1 byte`,
		"memlock: -4Mi\n": `config: memlock: "-4Mi" is neither unlimited nor a quantity of bytes (e.g. 4Mi, 64Gi)`,
		"memlock: lots\n": `config: memlock: "lots" is neither unlimited nor a quantity of bytes (e.g. 4Mi, 64Gi)`,
		"memlock: [1]\n":  "config: memlock: expected a single value",
	} {
		if _, err := load(text); err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%q: %v; want %s", text, err, want)
		}
	}

	s := &PodShaper{Config: cfg}
	pod := trainingPod(nil)
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{inRequirement("zone", "a")}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{inRequirement("zone", "b")}},
		}}}}
	if err := s.shape(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got, want := pod.Annotations[ulimitPrefix+"trainer"], "- type: RLIMIT_MEMLOCK\n  soft: 4194304\n  hard: 4194304\n"; got != want {
		t.Errorf("ulimit %q, want %q", got, want)
	}
	var terms []string
	for _, term := range pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		var words []string
		for _, e := range term.MatchExpressions {
			words = append(words, e.Key+" "+string(e.Operator)+" "+strings.Join(e.Values, ","))
		}
		terms = append(terms, strings.Join(words, "; "))
	}
	want := []string{
		"zone In a; podshaper.io/topology-validated In true; podshaper.io/memlock In unlimited; podshaper.io/gpu-count In 8",
		"zone In a; podshaper.io/topology-validated In true; podshaper.io/memlock Gt 4194303; podshaper.io/gpu-count In 8",
		"zone In b; podshaper.io/topology-validated In true; podshaper.io/memlock In unlimited; podshaper.io/gpu-count In 8",
		"zone In b; podshaper.io/topology-validated In true; podshaper.io/memlock Gt 4194303; podshaper.io/gpu-count In 8",
	}
	if strings.Join(terms, "\n") != strings.Join(want, "\n") {
		t.Errorf("terms\n%s\nwant\n%s", strings.Join(terms, "\n"), strings.Join(want, "\n"))
	}
}
