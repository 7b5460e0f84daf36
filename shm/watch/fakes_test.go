package watch

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"podshaper.io/shm/host"
	"podshaper.io/shm/kube"
	"podshaper.io/shm/memlock"
	"podshaper.io/shm/usage"
)

const (
	mi          int64 = 1 << 20
	kubeletRoot       = "/var/lib/kubelet"
	namespace         = "ml"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// clock is the tests' time: it moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeVolume is one volume of fakeHost: its statfs and its files.
type fakeVolume struct {
	space host.Space
	files []usage.File
}

// fakeHost is a host.Host in memory: volumes by host path, the files the pods' processes
// hold, and the removals it was asked for.
type fakeHost struct {
	mu           sync.Mutex
	clock        *clock
	vols         map[string]*fakeVolume
	held         map[usage.FileID]bool
	heldErr      error
	removeCost   time.Duration // what removing one file takes on the clock
	removed      []usage.File
	lists        int
	memlocks     map[uint32]memlock.Limit // by pid; a pid not there is an error
	memlockReads int
}

func newFakeHost(c *clock) *fakeHost {
	return &fakeHost{clock: c, vols: map[string]*fakeVolume{}, held: map[usage.FileID]bool{}, memlocks: map[uint32]memlock.Limit{}}
}

func (h *fakeHost) setMemlock(pid uint32, l memlock.Limit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.memlocks[pid] = l
}

func (h *fakeHost) Memlock(pid uint32) (memlock.Limit, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.memlockReads++
	l, ok := h.memlocks[pid]
	if !ok {
		return memlock.Limit{}, fmt.Errorf("open /proc/%d/limits: %w", pid, os.ErrNotExist)
	}
	return l, nil
}

func (h *fakeHost) setVolume(path string, space host.Space, files ...usage.File) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vols[path] = &fakeVolume{space: space, files: append([]usage.File(nil), files...)}
}

func (h *fakeHost) setUsed(path string, used int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vols[path].space.Used = used
}

func (h *fakeHost) removedNames() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var names []string
	for _, f := range h.removed {
		names = append(names, f.Name)
	}
	return names
}

func (h *fakeHost) Statfs(path string) (host.Space, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.vols[path]
	if !ok {
		return host.Space{}, fmt.Errorf("statfs %s: %w", path, os.ErrNotExist)
	}
	return v.space, nil
}

func (h *fakeHost) List(path string, max int) (host.Listing, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lists++
	v, ok := h.vols[path]
	if !ok {
		return host.Listing{}, fmt.Errorf("open %s: %w", path, os.ErrNotExist)
	}
	files := v.files
	partial := len(files) > max
	if partial {
		files = files[:max]
	}
	return host.Listing{Files: append([]usage.File(nil), files...), Partial: partial}, nil
}

func (h *fakeHost) Held(podUID string) (map[usage.FileID]bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.heldErr != nil {
		return nil, h.heldErr
	}
	held := map[usage.FileID]bool{}
	for id := range h.held {
		held[id] = true
	}
	return held, nil
}

// Remove removes the files that are still there with the same ID, each taking removeCost
// on the clock, and stops once the clock reaches the deadline.
func (h *fakeHost) Remove(path string, files []usage.File, deadline time.Time) ([]usage.File, int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.vols[path]
	if !ok {
		return nil, 0, fmt.Errorf("open %s: %w", path, os.ErrNotExist)
	}
	var removed []usage.File
	for i, f := range files {
		if !h.clock.now().Before(deadline) {
			return removed, len(files) - i, nil
		}
		for j, g := range v.files {
			if g.Name == f.Name && g.ID == f.ID {
				v.files = append(v.files[:j], v.files[j+1:]...)
				v.space.Used -= g.Bytes
				removed = append(removed, g)
				h.removed = append(h.removed, g)
				break
			}
		}
		h.clock.advance(h.removeCost)
	}
	return removed, 0, nil
}

// fakeKube is a kube.Client in memory: it records Events and PutUsage calls and answers
// GetUsage from a map.
type fakeKube struct {
	mu         sync.Mutex
	events     []sentEvent
	puts       []kube.ShmUsage
	usages     map[kube.PodRef]*kube.ShmUsage
	getErr     error
	failPuts   int   // how many PutUsage calls fail from now on
	failEvents int   // how many Event calls fail from now on
	failWith   error // what they fail with (nil: a transient error)
	duringPut  func(u *kube.ShmUsage)
}

type sentEvent struct {
	pod                  kube.PodRef
	typ, reason, message string
}

func newFakeKube() *fakeKube { return &fakeKube{usages: map[kube.PodRef]*kube.ShmUsage{}} }

func (k *fakeKube) Event(pod kube.PodRef, typ, reason, message string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failEvents > 0 {
		k.failEvents--
		return k.failure()
	}
	k.events = append(k.events, sentEvent{pod, typ, reason, message})
	return nil
}

func (k *fakeKube) GetUsage(pod kube.PodRef) (*kube.ShmUsage, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.getErr != nil {
		return nil, k.getErr
	}
	u, ok := k.usages[pod]
	if !ok {
		return nil, nil
	}
	c := *u
	c.Runs = append([]usage.Run(nil), u.Runs...)
	return &c, nil
}

func (k *fakeKube) PutUsage(u *kube.ShmUsage) error {
	if k.duringPut != nil {
		k.duringPut(u)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failPuts > 0 {
		k.failPuts--
		return k.failure()
	}
	k.puts = append(k.puts, *u)
	c := *u
	k.usages[u.Pod] = &c
	return nil
}

func (k *fakeKube) failure() error {
	if k.failWith != nil {
		return k.failWith
	}
	return errors.New("the API is away")
}

func (k *fakeKube) sent() ([]sentEvent, []kube.ShmUsage) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]sentEvent(nil), k.events...), append([]kube.ShmUsage(nil), k.puts...)
}

// sink records what Watch hands over.
type sink struct {
	mu     sync.Mutex
	events []sentEvent
	usages []handedUsage
}

type handedUsage struct {
	u      kube.ShmUsage
	urgent bool
}

func (s *sink) Event(pod kube.PodRef, typ, reason, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, sentEvent{pod, typ, reason, message})
}

func (s *sink) Usage(u kube.ShmUsage, urgent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usages = append(s.usages, handedUsage{u, urgent})
}

// take returns what was handed since the last take, and forgets it.
func (s *sink) take() ([]sentEvent, []handedUsage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, u := s.events, s.usages
	s.events, s.usages = nil, nil
	return e, u
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fixture is a Watch on the fakes, with a ProcRoot of its own.
type fixture struct {
	t     testing.TB
	clock *clock
	host  *fakeHost
	kube  *fakeKube
	sink  *sink
	cfg   Config
	w     *Watch
}

func newFixture(t testing.TB, change func(*Config)) *fixture {
	t.Helper()
	c := newClock()
	f := &fixture{t: t, clock: c, host: newFakeHost(c), kube: newFakeKube(), sink: &sink{},
		cfg: Config{Node: "node-1", KubeletRoot: kubeletRoot, ProcRoot: t.TempDir(), Clean: true}}
	if change != nil {
		change(&f.cfg)
	}
	f.w = New(f.cfg, f.host, f.kube, f.sink, quietLog(), c.now)
	return f
}

// alive makes a process of that pid exist under ProcRoot; gone makes it go.
func (f *fixture) alive(pid uint32) {
	f.t.Helper()
	if err := os.Mkdir(filepath.Join(f.cfg.ProcRoot, strconv.Itoa(int(pid))), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) gone(pid uint32) {
	f.t.Helper()
	if err := os.Remove(filepath.Join(f.cfg.ProcRoot, strconv.Itoa(int(pid)))); err != nil {
		f.t.Fatal(err)
	}
}

// shapedPod is a pod podshaper shaped, named name, with UID "uid-"+name.
func shapedPod(name string) Pod {
	return Pod{SandboxID: "sandbox-" + name, Ref: kube.PodRef{Namespace: namespace, Name: name, UID: "uid-" + name},
		Labels: map[string]string{ShapedLabel: "true", "app": name}}
}

// emptyDir is the host path of a pod's emptyDir volume.
func emptyDir(p Pod, volume string) string {
	return filepath.Join(kubeletRoot, "pods", p.Ref.UID, "volumes", "kubernetes.io~empty-dir", volume)
}

// ctr is a running container of p that mounts src at /dev/shm ("" mounts nothing there).
func ctr(p Pod, name string, pid uint32, src string) Container {
	mounts := map[string]string{"/etc/hosts": filepath.Join(kubeletRoot, "pods", p.Ref.UID, "etc-hosts")}
	if src != "" {
		mounts[ShmPath] = src
	}
	return Container{ID: name + "-" + strconv.Itoa(int(pid)), Name: name, SandboxID: p.SandboxID, Pid: pid,
		Running: true, Mounts: mounts, Annotations: map[string]string{restartCountAnnotation: "0"}}
}

// stopped is c as the runtime tells its stop at `at`.
func stopped(c Container, at time.Time, exit int32, reason string) Container {
	c.Running, c.FinishedAt, c.ExitCode, c.Reason = false, at, exit, reason
	return c
}

func tmpfs(size, used int64) host.Space { return host.Space{Size: size, Used: used, Tmpfs: true} }
