package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// docs/webhook.md "Limits": the bounds podshaper (shaping/request_limits.h) puts on what
// it reads and writes, which the peer mirrors.

func shapeErr(pod *corev1.Pod) error {
	s := &PodShaper{Config: DefaultConfig(), ShapedBy: "peer-webhook/test config=x"}
	return s.shape(context.Background(), pod)
}

func TestAnnotationsWithinTheAPIServersLimit(t *testing.T) {
	pad := func(pod *corev1.Pod, total int) *corev1.Pod {
		const key = "example.com/padding"
		pod.Annotations[key] = strings.Repeat("p", total-annotationsBytes(pod.Annotations)-len(key))
		return pod
	}
	if err := shapeErr(pad(trainingPod(nil), apiAnnotationsLimit+1)); err == nil ||
		!strings.HasPrefix(err.Error(), "metadata.annotations hold 262145 B (256.0 KiB) in all, above the API server's limit of 256Ki (262144 B)") {
		t.Errorf("before: %v", err)
	}
	// Not a GPU pod: checked before anything is read.
	pod := pad(trainingPod(nil), apiAnnotationsLimit+1)
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	if err := shapeErr(pod); err == nil {
		t.Error("a pod that is not a GPU pod is checked too")
	}
	// At the limit: what the peer adds takes it past.
	if err := shapeErr(pad(trainingPod(nil), apiAnnotationsLimit)); err == nil ||
		!strings.HasPrefix(err.Error(), "the annotations podshaper adds (podshaper.io/shm-formula ") ||
		!strings.Contains(err.Error(), "it has 262144 B (256.0 KiB) of its own") {
		t.Errorf("after: %v", err)
	}
	// A podshaper.io/warnings the user wrote is not kept, and does not count.
	pod = trainingPod(map[string]string{annWarnings: strings.Repeat("w", 20000)})
	if err := shapeErr(pad(pod, apiAnnotationsLimit-100)); err != nil {
		t.Errorf("user warnings: %v", err)
	}
	if _, ok := pod.Annotations[annWarnings]; ok {
		t.Error("user warnings kept")
	}
}

func TestUlimitAnnotationSize(t *testing.T) {
	entry := "- type: RLIMIT_NOFILE\n  soft: 1\n  hard: 1\n"
	of := func(size int) string { return "#" + strings.Repeat("u", size-len(entry)-2) + "\n" + entry }
	for _, prefix := range []string{ulimitPrefix, ulimitDeprecatedPrefix} {
		if err := shapeErr(trainingPod(map[string]string{prefix + "trainer": of(maxUlimitAnnotationBytes)})); err != nil {
			t.Errorf("%s at the limit: %v", prefix, err)
		}
		err := shapeErr(trainingPod(map[string]string{prefix + "other": of(maxUlimitAnnotationBytes + 1)}))
		if err == nil || !strings.HasPrefix(err.Error(), "annotation "+prefix+"other is 4097 B; podshaper reads a ulimit list of at most 4Ki (4096 B)") {
			t.Errorf("%s past it: %v", prefix, err)
		}
	}
	// In all, over both prefixes: 4096 B is taken, 4097 B is not.
	total := func(a, b int) error {
		return shapeErr(trainingPod(map[string]string{ulimitPrefix + "trainer": of(a), ulimitDeprecatedPrefix + "other": of(b)}))
	}
	if err := total(2048, 2048); err != nil {
		t.Errorf("4096 in all: %v", err)
	}
	if err := total(2048, 2049); err == nil || err.Error() != "the pod's NRI ulimit annotations (ulimits.noderesource.dev/container.<name>) hold more than 4Ki (4096 B) in all, what podshaper reads to add RLIMIT_MEMLOCK: keep one entry per rlimit in each" {
		t.Errorf("4097 in all: %v", err)
	}
	// Each is checked before the sum: the first one too large is named.
	if err := total(100, 4097); err == nil || !strings.HasPrefix(err.Error(), "annotation "+ulimitDeprecatedPrefix+"other is 4097 B;") {
		t.Errorf("one too large: %v", err)
	}
}

func TestInputAnnotationSize(t *testing.T) {
	// A count of 256 digits is still a count.
	if err := shapeErr(trainingPod(map[string]string{annWorkers: strings.Repeat("0", 255) + "8"})); err != nil {
		t.Errorf("256: %v", err)
	}
	for _, k := range inputAnnotations {
		err := shapeErr(trainingPod(map[string]string{k: strings.Repeat("0", 256) + "8"}))
		if err == nil || err.Error() != "annotation "+k+" is 257 B; podshaper reads at most 256 B of its annotations (a count, a quantity, a shape such as 32x3x224x224)" {
			t.Errorf("%s 257: %v", k, err)
		}
	}
	// Others are not podshaper's inputs.
	if err := shapeErr(trainingPod(map[string]string{"podshaper.io/other": strings.Repeat("x", 1000)})); err != nil {
		t.Errorf("not an input: %v", err)
	}
	// In key order: podshaper.io/ before ulimits.
	err := shapeErr(trainingPod(map[string]string{annWorkers: strings.Repeat("0", 257), ulimitPrefix + "trainer": strings.Repeat("u", 5000)}))
	if err == nil || !strings.HasPrefix(err.Error(), "annotation "+annWorkers+" is 257 B") {
		t.Errorf("order: %v", err)
	}
}

func TestContainerNames(t *testing.T) {
	named := func(names ...string) *corev1.Pod {
		pod := trainingPod(nil)
		one := pod.Spec.Containers[0]
		pod.Spec.Containers = nil
		for i, n := range names {
			c := *one.DeepCopy()
			c.Name = n
			if i > 0 {
				c.Resources = corev1.ResourceRequirements{}
			}
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
		return pod
	}
	if err := shapeErr(named(strings.Repeat("a", 63))); err != nil {
		t.Errorf("63: %v", err)
	}
	long := strings.Repeat("a", 64)
	if err := shapeErr(named(long)); err == nil || err.Error() != `container name "`+long+`" is 64 bytes; the API server takes at most 63 (a DNS label)` {
		t.Errorf("64: %v", err)
	}
	if err := shapeErr(named(long + "b")); err == nil || err.Error() != `container name "`+strings.Repeat("a", 61)+`..." is 65 bytes; the API server takes at most 63 (a DNS label)` {
		t.Errorf("65: %v", err)
	}
	// Not a GPU container: checked too.
	if err := shapeErr(named("trainer", long)); err == nil || !strings.Contains(err.Error(), "is 64 bytes") {
		t.Errorf("64, sidecar: %v", err)
	}
	if err := shapeErr(named("trainer", "sidecar", "trainer")); err == nil || err.Error() != `two containers are named "trainer"; the API server refuses a pod whose containers share a name: give each its own` {
		t.Errorf("twice: %v", err)
	}
}

func TestCutUtf8AsPodshaper(t *testing.T) {
	for _, tc := range []struct {
		text  string
		limit int
		want  string
	}{
		{"short", 64, "short"},
		{strings.Repeat("a", 64), 64, strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), 64, strings.Repeat("a", 61) + "..."},
		// The cut falls inside "é": the character goes.
		{strings.Repeat("é", 40), 64, strings.Repeat("é", 30) + "..."},
		// The cut falls after a whole "é": podshaper drops it too.
		{"a" + strings.Repeat("é", 40), 64, "a" + strings.Repeat("é", 29) + "..."},
		{"€€€€", 8, "€..."},   // inside the second
		{"€€€€", 9, "€..."},   // after the second: it goes too
		{"€€€€", 10, "€€..."}, // one byte into the third
		{"abcdef", 2, "..."},
	} {
		if got := cutUtf8(tc.text, tc.limit); got != tc.want {
			t.Errorf("cutUtf8(%q, %d) = %q, want %q", tc.text, tc.limit, got, tc.want)
		}
	}
}

func TestExpansionBounded(t *testing.T) {
	env := func(kv ...string) map[string]*string {
		out := map[string]*string{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = &kv[i+1]
		}
		return out
	}
	a1015 := strings.Repeat("0", 1014) + "1"
	if got := expand("--nnodes=$(A)", env("A", a1015)); got != "--nnodes="+a1015 {
		t.Errorf("1024 B: %d B", len(got))
	}
	if got := expand("--nnodes=$(A)", env("A", a1015+"0")); got != "--nnodes=$(A)" {
		t.Errorf("1025 B: %d B", len(got))
	}
	// Expansion stops at the $(NAME) that would take the word past; the rest stays.
	big := strings.Repeat("x", 1000)
	if got := expand("$(N)$(BIG)$(BIG)$(N)", env("N", "1", "BIG", big)); got != "1"+big+"$(BIG)$(N)" {
		t.Errorf("two BIG: %q", got)
	}
	// The word, cut, in the formula's words.
	c := &corev1.Container{Name: "trainer", Args: []string{"--nnodes=$(BIG)$(BIG)"},
		Env: []corev1.EnvVar{{Name: "BIG", Value: strings.Repeat("é", 500)}}}
	span := readJobSpan(c)
	if want := `torchrun --nnodes=` + strings.Repeat("é", 25) + `... in container "trainer" is not a node count`; span.kind != spanUnknown || span.source != want {
		t.Errorf("span %v %q", span.kind, span.source)
	}
}

func TestGPUContainers(t *testing.T) {
	pods := func(n int) *corev1.Pod {
		pod := trainingPod(map[string]string{annPlacement: shared})
		one := pod.Spec.Containers[0]
		one.Resources.Limits = corev1.ResourceList{gpuResource: resource.MustParse("1")}
		pod.Spec.Containers = nil
		for i := range n {
			c := *one.DeepCopy()
			c.Name = "rank-" + strconv.Itoa(i)
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
		return pod
	}
	if err := shapeErr(pods(maxGPUContainers)); err != nil {
		t.Errorf("64: %v", err)
	}
	if err := shapeErr(pods(maxGPUContainers + 1)); err == nil || !strings.Contains(err.Error(), "is GPU container 65 of the pod; podshaper shapes at most 64") {
		t.Errorf("65: %v", err)
	}
}

func TestNodeSelectorTerms(t *testing.T) {
	withTerms := func(terms, requirements int) *corev1.Pod {
		pod := trainingPod(nil)
		term := corev1.NodeSelectorTerm{}
		for range requirements {
			term.MatchFields = append(term.MatchFields, inRequirement("metadata.name", "n"))
		}
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
		for range terms {
			sel := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, *term.DeepCopy())
		}
		return pod
	}
	// 64 terms of 64 requirements would be 57344 B of keys and values: past the bytes.
	if err := shapeErr(withTerms(64, 1)); err != nil {
		t.Errorf("64 × 1: %v", err)
	}
	if err := shapeErr(withTerms(2, 64)); err != nil {
		t.Errorf("2 × 64: %v", err)
	}
	if err := shapeErr(withTerms(65, 1)); err == nil || !strings.Contains(err.Error(), "nodeSelectorTerms has 65 terms") {
		t.Errorf("65 terms: %v", err)
	}
	if err := shapeErr(withTerms(1, 65)); err == nil || !strings.Contains(err.Error(), "nodeSelectorTerms[0] has 65 requirements") {
		t.Errorf("65 requirements: %v", err)
	}
}

func TestNodeSelectorTermsBytes(t *testing.T) {
	// One term of a 4-byte key; the rest of the bytes in values, half in matchFields.
	withBytes := func(n, terms int) *corev1.Pod {
		pod := trainingPod(nil)
		expression := inRequirement("zone", strings.Repeat("a", n/2-4))
		field := inRequirement("metadata.name", strings.Repeat("b", n-n/2-len("metadata.name")))
		sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{expression}, MatchFields: []corev1.NodeSelectorRequirement{field}}}}
		for range terms - 1 {
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{})
		}
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}}
		return pod
	}
	if err := shapeErr(withBytes(maxSelectorTermsBytes, 1)); err != nil {
		t.Errorf("16384: %v", err)
	}
	const field = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
	want := field + " hold 16385 B (16.0 KiB) of keys and values; podshaper copies the terms to add its node requirements and takes at most 16Ki (16384 B): merge terms and values"
	if err := shapeErr(withBytes(maxSelectorTermsBytes+1, 1)); err == nil || err.Error() != want {
		t.Errorf("16385: %v", err)
	}
	// The bytes before the count of terms.
	if err := shapeErr(withBytes(maxSelectorTermsBytes+1, 65)); err == nil || err.Error() != want {
		t.Errorf("16385 in 65 terms: %v", err)
	}
}

// A term that already holds every requirement of one alternative (a shaped pod's manifest
// created again without podshaper.io/shaped-by) is kept; the others are multiplied.
func TestShapedTermsKept(t *testing.T) {
	gpuCount := inRequirement(labelGPUCount, "8")
	validated := inRequirement(labelTopologyValidated, "true")
	unlimited := inRequirement(labelMemlock, "unlimited")
	atLeast := corev1.NodeSelectorRequirement{Key: labelMemlock, Operator: corev1.NodeSelectorOpGt, Values: []string{"68719476735"}}
	zone := inRequirement("zone", "a")
	cfg := DefaultConfig()
	cfg.Memlock = []byte(`"64Gi"`)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	s := &PodShaper{Config: cfg, ShapedBy: "peer-webhook/test config=x"}
	pod := trainingPod(nil)
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{zone, gpuCount, unlimited, validated}}, // holds the first
			{MatchExpressions: []corev1.NodeSelectorRequirement{validated, atLeast, gpuCount}},         // holds the second
			{MatchExpressions: []corev1.NodeSelectorRequirement{validated, gpuCount}},                  // holds neither
		}}}}
	if err := s.shape(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	want := [][]corev1.NodeSelectorRequirement{
		{zone, gpuCount, unlimited, validated},
		{validated, atLeast, gpuCount},
		{validated, gpuCount, unlimited},
		{validated, gpuCount, atLeast},
	}
	if len(terms) != len(want) {
		t.Fatalf("%d terms: %+v", len(terms), terms)
	}
	for i := range want {
		if !equality.Semantic.DeepEqual(terms[i].MatchExpressions, want[i]) {
			t.Errorf("term %d: %+v", i, terms[i].MatchExpressions)
		}
	}
}

func TestBatchShapeDimensions(t *testing.T) {
	if _, err := shapeBytes(strings.Repeat("1x", 15)+"1", "float32"); err != nil {
		t.Errorf("16: %v", err)
	}
	if _, err := shapeBytes(strings.Repeat("1x", 16)+"1", "float32"); err == nil || !strings.Contains(err.Error(), "has 17 dimensions; at most 16") {
		t.Errorf("17: %v", err)
	}
}

func TestGPUCountSelectorAsLabelled(t *testing.T) {
	for text, ok := range map[string]bool{"8": true, "08": false, "+8": false, "0": false, "eight": false, " 8": false} {
		pod := trainingPod(nil)
		pod.Spec.NodeSelector = map[string]string{labelGPUCount: text}
		if err := shapeErr(pod); (err == nil) != ok {
			t.Errorf("%q: %v", text, err)
		}
	}
}

func TestOwnShmPathAsTheRuntimeResolvesIt(t *testing.T) {
	for path, want := range map[string]string{"/dev/shm": "v", "/dev/shm/": "v", "/dev//shm": "v", "/dev/shm/.": "v",
		"dev/shm": "v", "/dev/x/../shm": "v", "/dev/shm/x": "", "/dev": "", "": ""} {
		c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: path}}}
		if got := ownShmVolume(c); got != want {
			t.Errorf("%q: %q, want %q", path, got, want)
		}
	}
}

func TestShapedMeansWhatPodshaperWrote(t *testing.T) {
	pod := trainingPod(nil)
	pod.Spec.Volumes = []corev1.Volume{{Name: shmVolume}}
	if alreadyShaped(pod) {
		t.Error("a volume named podshaper-dshm is not shaped")
	}
	if err := shapeErr(pod); err == nil || !strings.Contains(err.Error(), `a volume named "podshaper-dshm"`) {
		t.Errorf("taken name: %v", err)
	}
	// Every GPU container mounts its own: podshaper adds no volume, the name is free.
	pod = trainingPod(nil)
	pod.Spec.Volumes = []corev1.Volume{{Name: shmVolume}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: shmVolume, MountPath: "/dev/shm"}}
	if err := shapeErr(pod); err != nil {
		t.Errorf("own mount: %v", err)
	}
}

// Two containers of 4 GPUs, the second with its own /dev/shm: podshaper's volume is the
// first one's half, and its memory is raised by all of it.
func TestVolumeSizedForTheContainersMountingIt(t *testing.T) {
	pod := trainingPod(nil)
	four := resource.MustParse("4")
	c := &pod.Spec.Containers[0]
	c.Resources.Limits = corev1.ResourceList{gpuResource: four, corev1.ResourceMemory: resource.MustParse("100Gi")}
	b := *c.DeepCopy()
	b.Name = "trainer-b"
	b.VolumeMounts = []corev1.VolumeMount{{Name: "own", MountPath: "/dev/shm"}}
	pod.Spec.Containers = append(pod.Spec.Containers, b)
	pod.Spec.Volumes = []corev1.Volume{{Name: "own"}}
	if err := shapeErr(pod); err != nil {
		t.Fatal(err)
	}
	// 8231Mi for the pod: 4116Mi for the containers of 4 of its 8 GPUs.
	if got := pod.Annotations[annShmSize]; got != "4116Mi" {
		t.Errorf("shm-size %s", got)
	}
	if f := pod.Annotations[annShmFormula]; !strings.HasSuffix(f, "/dev/shm = 8231Mi; podshaper's /dev/shm serves the containers holding 4 of the pod's 8 GPUs (the others mount their own): 4116Mi") {
		t.Errorf("formula %s", f)
	}
	v := pod.Spec.Volumes[len(pod.Spec.Volumes)-1]
	if v.Name != shmVolume || v.EmptyDir.SizeLimit.String() != "4116Mi" {
		t.Errorf("volume %+v", v)
	}
	if m := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; m.Value() != (100<<30)+4116<<20 {
		t.Errorf("memory %s", m.String())
	}
	if m := pod.Spec.Containers[1].Resources.Limits[corev1.ResourceMemory]; m.String() != "100Gi" {
		t.Errorf("own shm memory %s", m.String())
	}
}
