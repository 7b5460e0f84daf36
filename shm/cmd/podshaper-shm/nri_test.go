package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"

	"podshaper.io/shm/host"
	"podshaper.io/shm/kube"
	"podshaper.io/shm/usage"
	"podshaper.io/shm/watch"
)

// volumes is a Host of one tmpfs volume whose use the test sets; nothing is held.
type volumes struct {
	mu   sync.Mutex
	used int64
}

func (v *volumes) Statfs(string) (host.Space, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return host.Space{Size: 64 << 20, Used: v.used, Tmpfs: true}, nil
}
func (v *volumes) List(string, int) (host.Listing, error)     { return host.Listing{}, nil }
func (v *volumes) Held(string) (map[usage.FileID]bool, error) { return nil, nil }
func (v *volumes) Remove(string, []usage.File, time.Time) ([]usage.File, int, error) {
	return nil, 0, nil
}

// told is a Sink that records the Events' reasons and messages.
type told struct {
	mu     sync.Mutex
	events []string
	usages int
}

func (t *told) Event(_ kube.PodRef, _, reason, message string) {
	t.mu.Lock()
	t.events = append(t.events, reason+": "+message)
	t.mu.Unlock()
}
func (t *told) Usage(kube.ShmUsage, bool) {
	t.mu.Lock()
	t.usages++
	t.mu.Unlock()
}
func (t *told) written() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.usages
}
func (t *told) all() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.events, "\n")
}

// TestThroughContainerdsNRI: podshaper-shm's plugin registered with the NRI side containerd
// embeds (its adaptation, the same version), told a shaped pod's container start and stop
// as containerd tells them.
func TestThroughContainerdsNRI(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "nri.sock")
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error { _, err := cb(ctx, nil, nil); return err }
	updateFn := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	r, err := adaptation.New("containerd", "v2.4.2", syncFn, updateFn,
		adaptation.WithPluginPath(t.TempDir()), adaptation.WithPluginConfigPath(t.TempDir()), adaptation.WithSocketPath(socket))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)

	root, procRoot := t.TempDir(), t.TempDir()
	vol := &volumes{}
	sink := &told{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := watch.New(watch.Config{Node: "n", KubeletRoot: root, ProcRoot: procRoot, Clean: true}, vol, nil, sink, log, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced := make(chan struct{})
	var once sync.Once
	go connect(ctx, flags{nriSocket: socket}, w, log, func() { once.Do(func() { close(synced) }) })
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("podshaper-shm was not synchronized by NRI in 10 s")
	}

	pod := &api.PodSandbox{Id: "sb", Name: "train-0", Namespace: "ml", Uid: "u1",
		Labels: map[string]string{watch.ShapedLabel: "true"}}
	src := filepath.Join(root, "pods", "u1", "volumes", "kubernetes.io~empty-dir", watch.ShmVolume)
	if err := os.MkdirAll(filepath.Join(procRoot, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctr := &api.Container{Id: "c1", PodSandboxId: "sb", Name: "trainer", Pid: 4242,
		State:  api.ContainerState_CONTAINER_RUNNING,
		Mounts: []*api.Mount{{Destination: "/dev/shm", Source: src, Type: "bind"}}}
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
	defer tcancel()
	if err := r.RunPodSandbox(tctx, &adaptation.RunPodSandboxRequest{Pod: pod}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateContainer(tctx, &adaptation.CreateContainerRequest{Pod: pod, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	// The runtime lists a plugin among those it tells once its synchronization returned:
	// told again (a start already known changes nothing) until the run has begun (its
	// ShmUsage handed to the sink).
	deadline := time.Now().Add(5 * time.Second)
	for sink.written() == 0 {
		if err := r.PostStartContainer(tctx, &adaptation.PostStartContainerRequest{Pod: pod, Container: ctr}); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the container's start did not reach podshaper-shm")
		}
		time.Sleep(10 * time.Millisecond)
	}
	vol.mu.Lock()
	vol.used = 48 << 20
	vol.mu.Unlock()
	w.Tick()
	if g := w.Gauges(); len(g) != 1 || g[0].Pod != "train-0" || g[0].Used != 48<<20 || g[0].Peak != 48<<20 {
		t.Fatalf("gauges %+v, want train-0 at 48Mi", g)
	}
	ctr.State = api.ContainerState_CONTAINER_STOPPED
	if _, err := r.StopContainer(tctx, &adaptation.StopContainerRequest{Pod: pod, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(sink.all(), "ShmUsage: peak 48Mi of 64Mi (75%) in run 1") {
		if time.Now().After(deadline) {
			t.Fatalf("no ShmUsage Event after the stop; told:\n%s", sink.all())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.StopPodSandbox(tctx, &adaptation.StopPodSandboxRequest{Pod: pod}); err != nil {
		t.Fatal(err)
	}
	for len(w.Gauges()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the pod's series stayed after its sandbox stopped: %+v", w.Gauges())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
