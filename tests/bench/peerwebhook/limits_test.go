package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
		if err == nil || !strings.HasPrefix(err.Error(), "annotation "+prefix+"other is 16385 B (16.0 KiB); podshaper reads a ulimit list of at most 16Ki (16384 B)") {
			t.Errorf("%s past it: %v", prefix, err)
		}
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
	if err := shapeErr(withTerms(64, 64)); err != nil {
		t.Errorf("64 × 64: %v", err)
	}
	if err := shapeErr(withTerms(65, 1)); err == nil || !strings.Contains(err.Error(), "nodeSelectorTerms has 65 terms") {
		t.Errorf("65 terms: %v", err)
	}
	if err := shapeErr(withTerms(1, 65)); err == nil || !strings.Contains(err.Error(), "nodeSelectorTerms[0] has 65 requirements") {
		t.Errorf("65 requirements: %v", err)
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
