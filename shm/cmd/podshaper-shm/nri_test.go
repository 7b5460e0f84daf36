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
	"github.com/containerd/nri/pkg/stub"

	"podshaper.io/shm/host"
	"podshaper.io/shm/kube"
	"podshaper.io/shm/memlock"
	"podshaper.io/shm/usage"
	"podshaper.io/shm/watch"
)

// volumes is a Host of one tmpfs volume whose use the test sets; nothing is held.
type volumes struct {
	mu      sync.Mutex
	used    int64
	memlock memlock.Limit // every process's
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
func (v *volumes) Memlock(uint32) (memlock.Limit, error) { return v.memlock, nil }

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

// runtimeNRI starts the NRI side containerd embeds (its adaptation, the same version) on a
// socket of the test's.
func runtimeNRI(tb testing.TB, opts ...adaptation.Option) (*adaptation.Adaptation, string) {
	tb.Helper()
	socket := filepath.Join(tb.TempDir(), "nri.sock")
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error { _, err := cb(ctx, nil, nil); return err }
	updateFn := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	opts = append(opts, adaptation.WithPluginPath(tb.TempDir()), adaptation.WithPluginConfigPath(tb.TempDir()),
		adaptation.WithSocketPath(socket))
	r, err := adaptation.New("containerd", "v2.4.2", syncFn, updateFn, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Stop)
	return r, socket
}

// connected connects podshaper-shm's plugin (f) to the runtime's NRI and waits until it is
// synchronized.
func connected(ctx context.Context, tb testing.TB, f flags, w *watch.Watch, log *slog.Logger) {
	tb.Helper()
	synced := make(chan struct{})
	var once sync.Once
	go connect(ctx, f, w, log, func() { once.Do(func() { close(synced) }) })
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		tb.Fatal("podshaper-shm was not synchronized by NRI in 10 s")
	}
}

// memlockWatch is a Watch of node on a runtime whose default memlock is def, connected to
// the runtime's NRI at socket, with the hold or without, and listed among its plugins.
func memlockWatch(ctx context.Context, tb testing.TB, socket, node string, hold bool, def memlock.Limit, sink *told) *watch.Watch {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := watch.New(watch.Config{Node: node, KubeletRoot: tb.TempDir(), ProcRoot: tb.TempDir(), HoldMemlock: hold,
		RuntimeMemlock: def}, &volumes{}, nil, sink, log, time.Now)
	connected(ctx, tb, flags{nriSocket: socket, holdMemlock: hold}, w, log)
	time.Sleep(100 * time.Millisecond) // the runtime lists a plugin once its synchronization returned
	return w
}

// TestThroughContainerdsNRI: podshaper-shm's plugin registered with the NRI side containerd
// embeds (its adaptation, the same version), told a shaped pod's container start and stop
// as containerd tells them.
func TestThroughContainerdsNRI(t *testing.T) {
	r, socket := runtimeNRI(t)
	root, procRoot := t.TempDir(), t.TempDir()
	vol := &volumes{}
	sink := &told{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := watch.New(watch.Config{Node: "n", KubeletRoot: root, ProcRoot: procRoot, Clean: true}, vol, nil, sink, log, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connected(ctx, t, flags{nriSocket: socket}, w, log)

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

// ulimitStandIn adds RLIMIT_MEMLOCK 4Mi to every container named "train", as the node's
// ulimit-adjuster does for the annotation of askingPod.
type ulimitStandIn struct{}

func (ulimitStandIn) CreateContainer(_ context.Context, _ *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if c.GetName() != "train" {
		return nil, nil, nil
	}
	a := &api.ContainerAdjustment{}
	a.AddRlimit("RLIMIT_MEMLOCK", 4<<20, 4<<20)
	return a, nil, nil
}

const memlockAnnotation = "ulimits.noderesource.dev/container.train"

func askingPod(name string) *api.PodSandbox {
	return &api.PodSandbox{Id: "sb-" + name, Name: name, Namespace: "ml", Uid: "uid-" + name,
		Labels:      map[string]string{watch.ShapedLabel: "true"},
		Annotations: map[string]string{memlockAnnotation: "- type: RLIMIT_MEMLOCK\n  soft: 4194304\n  hard: 4194304\n"}}
}

// TestHoldThroughContainerdsNRI: with --hold-memlock, podshaper-shm is a validator of the
// runtime's NRI: a shaped container whose memlock no plugin set is not created, with the
// runtime's error carrying podshaper-shm's (after the marker); once the ulimit plugin runs,
// it is created with its memlock. Other containers pass.
func TestHoldThroughContainerdsNRI(t *testing.T) {
	r, socket := runtimeNRI(t)
	sink := &told{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	memlockWatch(ctx, t, socket, "real-h200x4-0", true, memlock.Limit{Soft: 8 << 20, Hard: 8 << 20}, sink)

	pod := askingPod("train-0")
	ctr := &api.Container{Id: "c1", PodSandboxId: pod.Id, Name: "train", Rlimits: []*api.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 1024}}}
	tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
	defer tcancel()
	if err := r.RunPodSandbox(tctx, &adaptation.RunPodSandboxRequest{Pod: pod}); err != nil {
		t.Fatal(err)
	}
	want := `validator "90-podshaper-shm" rejected container adjustment, reason: MemlockNotApplied: node real-h200x4-0 did not apply ` +
		"RLIMIT_MEMLOCK 4Mi that " + memlockAnnotation + " asks (it would get 8Mi, the runtime's default; no NRI plugin set it; " +
		"NRI plugins here: 90-podshaper-shm). podshaper-shm holds the container back until the node applies it; the kubelet tries again. " +
		"Fix: start the node's NRI ulimit-adjuster plugin."
	// The runtime asks a plugin once its synchronization returned: created until then.
	for {
		_, err := r.CreateContainer(tctx, &adaptation.CreateContainerRequest{Pod: pod, Container: ctr})
		if err != nil {
			if err.Error() != want {
				t.Fatalf("CreateContainer: %v\nwant %s", err, want)
			}
			break
		}
		if tctx.Err() != nil {
			t.Fatal("never held back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := r.CreateContainer(tctx, &adaptation.CreateContainerRequest{Pod: pod, Container: ctr}); err == nil || err.Error() != want {
		t.Fatalf("tried again: %v", err)
	}
	if got := sink.all(); got != "MemlockNotApplied: container train is held back: node real-h200x4-0 did not apply RLIMIT_MEMLOCK 4Mi "+
		"("+memlockAnnotation+"); it would get 8Mi, the runtime's default. It starts as soon as the node applies it (the kubelet retries). "+
		"Fix: start the node's NRI ulimit-adjuster plugin." {
		t.Errorf("Events: %q", got)
	}
	plain := &api.PodSandbox{Id: "sb-plain", Name: "plain", Namespace: "ml", Uid: "uid-plain", Annotations: pod.Annotations}
	if _, err := r.CreateContainer(tctx, &adaptation.CreateContainerRequest{Pod: plain,
		Container: &api.Container{Id: "c2", PodSandboxId: plain.Id, Name: "train"}}); err != nil {
		t.Errorf("an unshaped pod's container: %v", err)
	}

	s, err := stub.New(ulimitStandIn{}, stub.WithPluginName("ulimit-adjuster"), stub.WithPluginIdx("10"), stub.WithSocketPath(socket))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for {
		rpl, err := r.CreateContainer(tctx, &adaptation.CreateContainerRequest{Pod: pod, Container: ctr})
		if err == nil {
			if rl := rpl.GetAdjust().GetRlimits(); len(rl) != 1 || rl[0].GetSoft() != 4<<20 {
				t.Fatalf("created with rlimits %v", rl)
			}
			break
		}
		if tctx.Err() != nil {
			t.Fatalf("still held back with the ulimit plugin running: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkCreateContainerThroughNRI: what one container's creation costs through the
// runtime's NRI with podshaper-shm connected, without and with the hold (its validation is
// a second call of the runtime to podshaper-shm, after the plugins' CreateContainer).
func BenchmarkCreateContainerThroughNRI(b *testing.B) {
	for _, hold := range []bool{false, true} {
		name := "plugin"
		if hold {
			name = "plugin+validator"
		}
		b.Run(name, func(b *testing.B) {
			r, socket := runtimeNRI(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			memlockWatch(ctx, b, socket, "n", hold, memlock.Limit{Soft: 4 << 20, Hard: 4 << 20}, &told{})
			pod := askingPod("train-0")
			ctr := &api.Container{Id: "c1", PodSandboxId: pod.Id, Name: "train"}
			b.ResetTimer()
			for range b.N {
				if _, err := r.CreateContainer(ctx, &adaptation.CreateContainerRequest{Pod: pod, Container: ctr}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestValidatorOnlyWhereAsked: without --hold-memlock podshaper-shm does not validate (the
// runtime does not call it at each creation); with it, a runtime whose NRI asks no
// validators (it would refuse the whole plugin) is refused at Configure, saying why.
func TestValidatorOnlyWhereAsked(t *testing.T) {
	if _, ok := any(&plugin{}).(stub.ValidateContainerAdjustmentInterface); ok {
		t.Error("the plain plugin validates")
	}
	if _, ok := any(&validator{}).(stub.ValidateContainerAdjustmentInterface); !ok {
		t.Error("the validator does not validate")
	}
	for v, want := range map[string]bool{"v0.12.3": true, "v0.10.0": true, "v0.11.0-rc.1": true, "v0.9.0": false,
		"v0.8.0": false, "unknown": false, "": false} {
		if asksValidators(v) != want {
			t.Errorf("asksValidators(%q) = %v", v, !want)
		}
	}
	v := &validator{runtimeNRI: func() string { return "v0.8.0" }}
	_, err := v.Configure(context.Background(), "", "containerd", "v2.1.4")
	const want = "containerd v2.1.4 has NRI v0.8.0, which asks no validators (from v0.10.0 on)"
	if err == nil || err.Error() != want || v.tooOld != want {
		t.Errorf("Configure: %v, want %q", err, want)
	}
	v = &validator{runtimeNRI: func() string { return "v0.11.0" }}
	if mask, err := v.Configure(context.Background(), "", "containerd", "v2.2.1"); err != nil || mask != 0 || v.tooOld != "" {
		t.Errorf("Configure on v0.11.0: %v, %v", mask, err)
	}
}

// TestNoHoldOnAnOlderRuntime: a runtime whose NRI asks no validators: podshaper-shm
// connects without the hold, and a shaped container without its memlock is created.
func TestNoHoldOnAnOlderRuntime(t *testing.T) {
	r, socket := runtimeNRI(t)
	asked := 0
	runtimeNRIVersion = func(stub.Stub) string { asked++; return "v0.8.0" } // as containerd v2.1 says
	defer func() { runtimeNRIVersion = func(s stub.Stub) string { return s.RuntimeNRIVersion() } }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	memlockWatch(ctx, t, socket, "n", true, memlock.Limit{Soft: 8 << 20, Hard: 8 << 20}, &told{})
	pod := askingPod("train-0")
	if _, err := r.CreateContainer(ctx, &adaptation.CreateContainerRequest{Pod: pod,
		Container: &api.Container{Id: "c1", PodSandboxId: pod.Id, Name: "train"}}); err != nil {
		t.Errorf("held back on a runtime that asks no validators: %v", err)
	}
	if asked != 1 {
		t.Errorf("the runtime's NRI version asked %d times, want once (then connected without the hold)", asked)
	}
}
