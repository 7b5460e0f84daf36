// Package watch is podshaper-shm's state: the shaped pods on this node, their /dev/shm
// volumes and the containers that mount them, fed by the container runtime's events (NRI,
// translated by the binary) and a sampling tick. It asks usage for every decision, host for
// what it reads and removes, and hands what the API must hear to a Sink: the runtime never
// waits on an API write. The one API read, a pod's ShmUsage, is made once per pod when
// podshaper-shm connects (Sync), so that a run still open keeps its peak.
package watch

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"podshaper.io/shm/host"
	"podshaper.io/shm/kube"
	"podshaper.io/shm/memlock"
	"podshaper.io/shm/usage"
)

// The names podshaper writes on a shaped pod (api/names.h in the C++ tree).
const (
	ShapedLabel = "podshaper.io/shaped"
	ShmVolume   = "podshaper-dshm"
	ShmPath     = "/dev/shm"
	// The kubelet's annotation on each container it creates.
	restartCountAnnotation = "io.kubernetes.container.restartCount"
)

// Event reasons, as kubectl describe shows them.
const (
	ReasonNearlyFull       = "ShmNearlyFull"
	ReasonUsage            = "ShmUsage"
	ReasonLeftoversRemoved = "ShmLeftoversRemoved"
	listBound              = 20000           // names read at a threshold, a run's end or a clean (about 0.2 s)
	cleanBudget            = 1 * time.Second // what removing a dead run's files may take before a start
	significantUseFraction = 0.01            // a change of use worth writing: 1% of the size
	eventTypeNormal        = "Normal"
	eventTypeWarning       = "Warning"
)

// Pod is what the runtime says of a pod sandbox.
type Pod struct {
	SandboxID   string
	Ref         kube.PodRef
	Labels      map[string]string
	Annotations map[string]string
}

// Container is what the runtime says of a container.
type Container struct {
	ID, Name    string
	SandboxID   string
	Pid         uint32
	Running     bool
	Mounts      map[string]string // destination → host source
	Annotations map[string]string
	StartedAt   time.Time
	FinishedAt  time.Time
	ExitCode    int32
	Reason      string           // the runtime's status reason, e.g. "Completed", "Error", "OOMKilled"
	Rlimits     []memlock.Rlimit // its own, from its spec (before the NRI plugins adjust it)
}

// Sink receives what the API must hear: Events and the ShmUsage to write. It must not block.
type Sink interface {
	Event(pod kube.PodRef, typ, reason, message string)
	Usage(u kube.ShmUsage, urgent bool)
}

// Config is podshaper-shm's settings.
type Config struct {
	Node             string
	KubeletRoot      string // the kubelet's --root-dir, as this process sees it
	ProcRoot         string // the host's /proc (hostPID): "/proc"
	Clean            bool   // remove a dead run's files before a restarted container starts
	CleanUserVolumes bool   // ... also in a pod's own emptyDir at /dev/shm
	// Memlock as promised (memlock.go): hold back a shaped container whose RLIMIT_MEMLOCK
	// is not what its annotation asks; RuntimeMemlock is what the runtime gives a container
	// nothing sets one for.
	HoldMemlock    bool
	RuntimeMemlock memlock.Limit
}

type volume struct {
	name     string
	hostPath string
	user     bool
	usage.Volume
	written usage.Volume // what the API last got
}

type podState struct {
	Pod
	vol     *volume
	skipped string                // why its /dev/shm is not watched
	running map[string]*Container // by id: running containers that mount the volume
	stopped map[string]time.Time  // by container name: when its last instance stopped
	inRun   map[string]bool       // by container name: those that ran in the open run
	endHow  string                // how the open run's first container to stop ended
	// The API's ShmUsage: read (recovered), or still to be read (pending: its reading failed,
	// so nothing of this pod is written, lest the runs kept there be replaced by fewer).
	recovered, pending bool
	syncBegun          bool // the open run was begun by Sync, maybe the API's open run going on
}

// Watch is the state. Its methods are safe to call from several goroutines.
type Watch struct {
	cfg  Config
	host host.Host
	kube kube.Client // read only (recovering a run after a restart); writes go to sink
	sink Sink
	log  *slog.Logger
	now  func() time.Time

	mu    sync.Mutex
	pods  map[string]*podState // by sandbox id
	later []tell               // Events that need the volume's files read: told once the lock is let go

	memlocks memlocks // its own lock
}

// tell is an Event whose words need what fills the volume, read after the lock is let go
// (a listing may take 0.2 s; the runtime may be waiting for the lock meanwhile).
type tell struct {
	ref         kube.PodRef
	path        string
	typ, reason string
	message     func(t *usage.Tally) string
}

// New returns an empty Watch.
func New(cfg Config, h host.Host, k kube.Client, sink Sink, log *slog.Logger, now func() time.Time) *Watch {
	return &Watch{cfg: cfg, host: h, kube: k, sink: sink, log: log, now: now, pods: map[string]*podState{},
		memlocks: newMemlocks()}
}

// unlock lets the lock go, then tells the Events that wait for the volume's files.
func (w *Watch) unlock() {
	later := w.later
	w.later = nil
	w.mu.Unlock()
	for _, t := range later {
		var tally *usage.Tally
		if listing, err := w.host.List(t.path, listBound); err == nil {
			x := usage.TallyOf(listing.Files, listing.Partial)
			tally = &x
		}
		w.sink.Event(t.ref, t.typ, t.reason, t.message(tally))
	}
}

// Shaped says whether podshaper shaped the pod.
func Shaped(labels map[string]string) bool { return labels[ShapedLabel] == "true" }

// volumeOf finds the pod's /dev/shm volume among a container's mounts: the emptyDir the
// kubelet keeps under <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>. A /dev/shm
// from elsewhere (a hostPath) is not measured, and the reason says so; no /dev/shm mount:
// nothing, no reason.
func volumeOf(cfg Config, pod kube.PodRef, mounts map[string]string) (*volume, string) {
	src, ok := mounts[ShmPath]
	if !ok {
		return nil, ""
	}
	dir := filepath.Join(cfg.KubeletRoot, "pods", pod.UID, "volumes", "kubernetes.io~empty-dir")
	name := filepath.Base(src)
	if filepath.Dir(src) != dir || name == "." || name == ".." {
		return nil, fmt.Sprintf("/dev/shm is %s on the host, not an emptyDir of the pod: not measured, not cleaned", src)
	}
	return &volume{name: name, hostPath: src, user: name != ShmVolume}, ""
}

func (w *Watch) podFor(p Pod) *podState {
	ps := w.pods[p.SandboxID]
	if ps == nil {
		ps = &podState{Pod: p, running: map[string]*Container{}, stopped: map[string]time.Time{}, inRun: map[string]bool{}}
		w.pods[p.SandboxID] = ps
	}
	return ps
}

// attach finds the pod's volume from one of its containers; false when the container does
// not mount a watched /dev/shm.
func (w *Watch) attach(ps *podState, c *Container) bool {
	if ps.vol != nil {
		return c.Mounts[ShmPath] == ps.vol.hostPath
	}
	v, why := volumeOf(w.cfg, ps.Ref, c.Mounts)
	if v == nil {
		if why != "" && ps.skipped == "" {
			ps.skipped = why
			w.log.Info("skipped", "pod", ps.Ref.Namespace+"/"+ps.Ref.Name, "why", why)
		}
		return false
	}
	space, err := w.host.Statfs(v.hostPath)
	if err != nil {
		w.log.Warn("statfs failed", "pod", ps.Ref.Namespace+"/"+ps.Ref.Name, "path", v.hostPath, "error", err)
		return false
	}
	if !space.Tmpfs {
		ps.skipped = fmt.Sprintf("/dev/shm is the emptyDir %s, on disk (no medium: Memory): not measured", v.name)
		w.log.Info("skipped", "pod", ps.Ref.Namespace+"/"+ps.Ref.Name, "why", ps.skipped)
		return false
	}
	v.Size, v.Used = space.Size, space.Used
	ps.vol = v
	return true
}

// read reads pods' ShmUsages, without the lock: the API may be slow.
func (w *Watch) read(refs []kube.PodRef) map[kube.PodRef]*kube.ShmUsage {
	got := map[kube.PodRef]*kube.ShmUsage{}
	for _, ref := range refs {
		u, err := w.kube.GetUsage(ref)
		if err != nil {
			w.log.Warn("reading ShmUsage failed; nothing of the pod is written until it is read", "pod",
				ref.Namespace+"/"+ref.Name, "error", err)
			continue
		}
		got[ref] = u // nil: none
	}
	return got
}

// recover takes what the API kept of the pod's runs (read: u, which is nil when there is
// none). Runs measured here since, if any, go on after them: the first one, begun when
// podshaper-shm connected, is the API's open run going on.
func (w *Watch) recover(ps *podState, u *kube.ShmUsage) {
	ps.recovered, ps.pending = true, false
	if u == nil || u.Volume != ps.vol.name || len(u.Runs) == 0 {
		return
	}
	kept := append([]usage.Run(nil), u.Runs...)
	// Runs the API already holds, because this process wrote them (a reconnect to a
	// restarted containerd, not a restart of podshaper-shm): the same run, by its start
	// (the API keeps microseconds), the local one the newer.
	var local []usage.Run
	for _, l := range ps.vol.Runs {
		if i := slices.IndexFunc(kept, func(k usage.Run) bool { return sameInstant(k.StartedAt, l.StartedAt) }); i >= 0 {
			k := kept[i]
			l.Number, l.NearlyFull = k.Number, l.NearlyFull || k.NearlyFull
			if k.Peak > l.Peak { // measured before a restart of podshaper-shm
				l.Peak, l.PeakAt = k.Peak, k.PeakAt
			}
			if l.EndedAt.IsZero() && !k.EndedAt.IsZero() {
				l.EndedAt, l.Ended = k.EndedAt, k.Ended
			}
			kept[i] = l
			continue
		}
		local = append(local, l)
	}
	last := &kept[len(kept)-1]
	// The API's open run goes on here: Sync began it when podshaper-shm connected.
	if len(local) > 0 && ps.syncBegun && last.EndedAt.IsZero() {
		l := local[0]
		if l.Peak > last.Peak {
			last.Peak, last.PeakAt = l.Peak, l.PeakAt
		}
		last.Size, last.NearlyFull = l.Size, last.NearlyFull || l.NearlyFull
		last.EndedAt, last.Ended = l.EndedAt, l.Ended
		local = local[1:]
	} else if last.EndedAt.IsZero() && len(local) > 0 {
		// Open when podshaper-shm went away, and not going on: it ended before what runs now.
		last.EndedAt, last.Ended = local[0].StartedAt, "Restarted"
	}
	for _, l := range local {
		l.Number = kept[len(kept)-1].Number + 1
		kept = append(kept, l)
	}
	if len(kept) > usage.RunsKept {
		kept = kept[len(kept)-usage.RunsKept:]
	}
	ps.vol.Runs = kept
	ps.syncBegun = false
	if len(local) == 0 && len(ps.vol.Runs) == len(u.Runs) {
		ps.vol.written = ps.vol.Volume
		ps.vol.written.Runs = append([]usage.Run(nil), ps.vol.Runs...)
	}
}

func sameInstant(a, b time.Time) bool { return a.Sub(b).Abs() < time.Millisecond }

// Sync takes the runtime's state when podshaper-shm connects (again): every pod and
// container. Pods no longer there are forgotten (their open runs end). A shaped pod's
// running containers that mount its volume continue the run the API kept open, or begin
// one at their start; an open run that a container's stop ended meanwhile ends there.
// Running containers of shaped pods have their memlock checked (memlock.go).
func (w *Watch) Sync(pods []Pod, ctrs []Container) {
	w.syncMemlocks(pods, ctrs)
	byID := map[string]Pod{}
	for _, p := range pods {
		if Shaped(p.Labels) {
			byID[p.SandboxID] = p
		}
	}
	sort.Slice(ctrs, func(i, j int) bool { return ctrs[i].StartedAt.Before(ctrs[j].StartedAt) })
	w.mu.Lock()
	for id, ps := range w.pods {
		if _, ok := byID[id]; !ok {
			w.forget(id, ps)
		}
	}
	var toRead []kube.PodRef
	for i := range ctrs {
		c := ctrs[i]
		if p, ok := byID[c.SandboxID]; ok {
			if ps := w.podFor(p); w.attach(ps, &c) && !ps.recovered && !ps.pending && w.kube != nil {
				ps.pending = true
				toRead = append(toRead, ps.Ref)
			}
		}
	}
	w.mu.Unlock()
	got := w.read(toRead)
	w.mu.Lock()
	defer w.unlock()
	for _, ps := range w.pods {
		if u, ok := got[ps.Ref]; ok && ps.vol != nil {
			w.recover(ps, u)
		}
	}
	lastStopped := map[*podState]Container{}
	for i := range ctrs {
		c := ctrs[i]
		ps := w.pods[c.SandboxID]
		if ps == nil || ps.vol == nil || !w.attach(ps, &c) {
			continue
		}
		if !c.Running {
			if c.FinishedAt.After(ps.stopped[c.Name]) {
				ps.stopped[c.Name] = c.FinishedAt
			}
			if c.FinishedAt.After(lastStopped[ps].FinishedAt) {
				lastStopped[ps] = c
			}
			continue
		}
		// A container that stopped after the open run began and before this one started: the
		// run ended there (podshaper-shm was away), and this one begins the next.
		if cur := ps.vol.Current(); cur != nil {
			if s, ok := lastStopped[ps]; ok && s.FinishedAt.After(cur.StartedAt) && !s.FinishedAt.After(c.StartedAt) &&
				len(ps.running) == 0 {
				w.endRun(ps, s.FinishedAt, howEnded(s))
			}
		}
		ps.running[c.ID] = &c
		if ps.vol.Current() == nil {
			w.begin(ps, c.StartedAt)
			ps.syncBegun = ps.pending
		}
		ps.inRun[c.Name] = true
	}
	for ps, c := range lastStopped {
		if len(ps.running) == 0 {
			w.endRun(ps, c.FinishedAt, howEnded(c))
		}
	}
}

// Create is told before a container is created. When a container of a shaped pod that
// mounts its volume is created again (the kubelet's restart count above 0), the files its
// dead run left (held by no live process of the pod, last changed before that run ended;
// while another container of the pod runs, only NCCL's, torch's, OpenMP's and PSM/MPI's)
// are removed, and the pod is told. It returns once done: the runtime waits for it.
func (w *Watch) Create(p Pod, c Container) {
	if !Shaped(p.Labels) {
		return
	}
	w.mu.Lock()
	ps := w.podFor(p)
	if !w.attach(ps, &c) {
		w.unlock()
		return
	}
	now := w.now()
	// Its dead instance, when the runtime has not told its stop yet (it tells exits
	// asynchronously): stopped now.
	for id, old := range ps.running {
		if old.Name == c.Name {
			w.stop(ps, id, now, "Restarted")
		}
	}
	v := ps.vol
	restarts, _ := strconv.Atoi(c.Annotations[restartCountAnnotation])
	cutoff, known := ps.stopped[c.Name]
	// The run this container's start will begin: the next, unless it joins an open run it
	// has not been part of (its start then ends nothing).
	nextRun := 1
	if cur := v.Runs; len(cur) > 0 {
		nextRun = cur[len(cur)-1].Number + 1
		if v.Current() != nil && !ps.inRun[c.Name] {
			nextRun--
		}
	}
	othersRun := len(ps.running) > 0
	w.unlock()
	if !w.cfg.Clean || restarts == 0 || (v.user && !w.cfg.CleanUserVolumes) {
		return
	}
	if !known || cutoff.After(now) {
		cutoff = now // not seen stopping (podshaper-shm started since): what is there now is the dead run's
	}
	w.clean(ps.Ref, v, nextRun, cutoff, now, othersRun)
}

func (w *Watch) clean(ref kube.PodRef, v *volume, nextRun int, cutoff, now time.Time, onlyKnown bool) {
	who := ref.Namespace + "/" + ref.Name
	listing, err := w.host.List(v.hostPath, listBound)
	if err != nil {
		w.log.Warn("listing /dev/shm failed; nothing removed", "pod", who, "error", err)
		return
	}
	if len(listing.Files) == 0 {
		return
	}
	held, err := w.host.Held(ref.UID)
	if err != nil {
		w.log.Warn("reading what the pod's processes hold failed; nothing removed", "pod", who, "error", err)
		return
	}
	dead := usage.Leftovers(listing.Files, held, cutoff)
	if onlyKnown {
		// Another container of the pod runs: what it wrote and closed is its own, unless it
		// is what a crashed NCCL or DataLoader leaves.
		known := dead[:0]
		for _, f := range dead {
			if usage.KindOf(f.Name) != usage.KindOther {
				known = append(known, f)
			}
		}
		dead = known
	}
	if len(dead) == 0 {
		return
	}
	kept := 0 // the dead run's files that a live process still holds
	for _, f := range listing.Files {
		if held[f.ID] && f.ChangedAt.Before(cutoff) {
			kept++
		}
	}
	removed, notReached, err := w.host.Remove(v.hostPath, dead, now.Add(cleanBudget))
	if err != nil {
		w.log.Warn("removing a dead run's files failed", "pod", who, "error", err)
	}
	if len(removed) == 0 {
		return
	}
	tally := usage.TallyOf(removed, false)
	n, bytes := tally.Total()
	w.log.Info("removed a dead run's files", "pod", who, "files", n, "bytes", bytes, "kept", kept, "notReached", notReached)
	msg := usage.LeftoversMessage(nextRun, tally, kept, notReached)
	if listing.Partial {
		msg += fmt.Sprintf(" Only its first %d names were read: more may be left.", listBound)
	}
	w.sink.Event(ref, eventTypeNormal, ReasonLeftoversRemoved, msg)
}

// Start is told when a container has started. One that mounts a shaped pod's volume
// begins a run unless one is open; when it had run in the open run already (a restart
// while another container of the pod kept running), that run ends and the next begins.
// A shaped pod's container has its memlock checked (memlock.go).
func (w *Watch) Start(p Pod, c Container) {
	if !Shaped(p.Labels) {
		return
	}
	w.checkStarted(p, c)
	w.mu.Lock()
	defer w.unlock()
	ps := w.podFor(p)
	if !w.attach(ps, &c) {
		return
	}
	// No API read here: the runtime waits for this call. A pod that was on the node when
	// podshaper-shm connected was recovered in Sync; one that starts later is new.
	at := c.StartedAt
	if at.IsZero() {
		at = w.now()
	}
	if _, known := ps.running[c.ID]; known {
		return // told again
	}
	if ps.vol.Current() != nil && ps.inRun[c.Name] {
		how := ps.endHow
		if how == "" {
			how = "Restarted"
		}
		w.endRun(ps, at, how)
	}
	c.Running = true
	ps.running[c.ID] = &c
	if ps.vol.Current() == nil {
		w.begin(ps, at)
	}
	ps.inRun[c.Name] = true
}

// begin starts the pod's next run at `at` with a sample of its use now, and tells it.
func (w *Watch) begin(ps *podState, at time.Time) {
	v := ps.vol
	v.Start(at)
	ps.inRun, ps.endHow, ps.syncBegun = map[string]bool{}, "", false
	if space, err := w.host.Statfs(v.hostPath); err == nil {
		v.Observe(w.now(), space.Size, space.Used)
	}
	w.emitUsage(ps, true)
}

// Stop is told when a container stopped. The run ends when no container that mounts the
// volume runs any more, told how the first of them to stop ended.
func (w *Watch) Stop(sandboxID string, c Container) {
	w.memlockStopped(c.ID)
	w.mu.Lock()
	defer w.unlock()
	ps := w.pods[sandboxID]
	if ps == nil || ps.vol == nil {
		return
	}
	at := c.FinishedAt
	if at.IsZero() {
		at = w.now()
	}
	w.stop(ps, c.ID, at, howEnded(c))
}

// stop: container id of the pod stopped at `at`, as `how`.
func (w *Watch) stop(ps *podState, id string, at time.Time, how string) {
	known, wasRunning := ps.running[id]
	if !wasRunning {
		return
	}
	delete(ps.running, id)
	if at.After(ps.stopped[known.Name]) {
		ps.stopped[known.Name] = at
	}
	if ps.endHow == "" {
		ps.endHow = how
	}
	if len(ps.running) == 0 {
		w.endRun(ps, at, ps.endHow)
	}
}

func howEnded(c Container) string {
	switch {
	case c.Reason != "" && c.Reason != "Error":
		return c.Reason
	case c.ExitCode == 0 && c.Reason == "":
		return "Completed"
	default:
		return fmt.Sprintf("Error (exit %d)", c.ExitCode)
	}
}

// endRun ends the open run at `at`; its ShmUsage Event, with what the volume holds then,
// is told once the lock is let go.
func (w *Watch) endRun(ps *podState, at time.Time, how string) {
	v := ps.vol
	if v.Current() == nil {
		return
	}
	if space, err := w.host.Statfs(v.hostPath); err == nil {
		v.Observe(at, space.Size, space.Used)
	}
	run := v.End(at, how)
	user := v.user
	w.later = append(w.later, tell{ref: ps.Ref, path: v.hostPath, typ: eventTypeNormal, reason: ReasonUsage,
		message: func(t *usage.Tally) string { return usage.UsageMessage(*run, t, user) }})
	ps.inRun, ps.endHow = map[string]bool{}, ""
	w.emitUsage(ps, true)
}

// PodGone is told when a pod sandbox stops: an open run ends, and the pod is forgotten
// (its metrics go with it).
func (w *Watch) PodGone(sandboxID string) {
	w.memlockPodGone(sandboxID)
	w.mu.Lock()
	defer w.unlock()
	if ps := w.pods[sandboxID]; ps != nil {
		w.forget(sandboxID, ps)
	}
}

func (w *Watch) forget(id string, ps *podState) {
	if ps.vol != nil {
		how := ps.endHow
		if how == "" {
			how = "Pod stopped"
		}
		w.endRun(ps, w.now(), how)
	}
	delete(w.pods, id)
}

// Tick samples every watched volume: its use and the open run's peak; a run whose use
// reaches 90% of the size is warned once; a container whose process is gone (a stop the
// runtime did not tell) is stopped. Then what changed goes to the sink. A pod whose
// ShmUsage could not be read is read again first.
func (w *Watch) Tick() {
	w.mu.Lock()
	var toRead []kube.PodRef
	for _, ps := range w.pods {
		if ps.pending && w.kube != nil {
			toRead = append(toRead, ps.Ref)
		}
	}
	if len(toRead) > 0 {
		w.mu.Unlock()
		got := w.read(toRead)
		w.mu.Lock()
		for _, ps := range w.pods {
			if u, ok := got[ps.Ref]; ok && ps.pending && ps.vol != nil {
				w.recover(ps, u)
				w.emitUsage(ps, true)
			}
		}
	}
	defer w.unlock()
	now := w.now()
	for _, ps := range w.pods {
		v := ps.vol
		if v == nil {
			continue
		}
		for id, c := range ps.running {
			if c.Pid != 0 && !w.alive(c.Pid) {
				w.stop(ps, id, now, "Stopped")
			}
		}
		space, err := w.host.Statfs(v.hostPath)
		if err != nil {
			continue
		}
		if v.Observe(now, space.Size, space.Used) {
			run, used, user := *v.Current(), space.Used, v.user
			w.later = append(w.later, tell{ref: ps.Ref, path: v.hostPath, typ: eventTypeWarning, reason: ReasonNearlyFull,
				message: func(t *usage.Tally) string {
					if t == nil {
						t = &usage.Tally{}
					}
					return usage.NearlyFullMessage(run, used, *t, user)
				}})
			v.MarkNearlyFull()
			w.emitUsage(ps, true)
			continue
		}
		w.emitUsage(ps, false)
	}
}

func (w *Watch) alive(pid uint32) bool {
	_, err := os.Stat(filepath.Join(w.cfg.ProcRoot, strconv.FormatUint(uint64(pid), 10)))
	return err == nil
}

// emitUsage hands the pod's ShmUsage to the sink when it changed enough to be worth a
// write: a run begun, ended or warned (urgent), its peak or size, or its use by 1% of the size.
func (w *Watch) emitUsage(ps *podState, urgent bool) {
	v := ps.vol
	if ps.pending || (!urgent && !changed(v.written, v.Volume)) {
		return
	}
	v.written = v.Volume
	v.written.Runs = append([]usage.Run(nil), v.Runs...)
	w.sink.Usage(kube.ShmUsage{
		Pod: ps.Ref, Node: w.cfg.Node, Volume: v.name, UserVolume: v.user,
		Size: v.Size, Used: v.Used, ObservedAt: w.now(), Runs: v.written.Runs,
	}, urgent)
}

func changed(was, is usage.Volume) bool {
	if was.Size != is.Size || len(was.Runs) != len(is.Runs) {
		return true
	}
	if n := len(is.Runs); n > 0 && was.Runs[n-1] != is.Runs[n-1] {
		return true
	}
	d := was.Used - is.Used
	if d < 0 {
		d = -d
	}
	return float64(d) >= significantUseFraction*float64(is.Size)
}

// Gauge is one pod's /dev/shm for the metrics.
type Gauge struct {
	Namespace, Pod   string
	Size, Used, Peak int64
}

// Gauges: every watched pod's size, use and peak (the open run's, else the last run's).
func (w *Watch) Gauges() []Gauge {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Gauge
	for _, ps := range w.pods {
		if ps.vol == nil {
			continue
		}
		g := Gauge{Namespace: ps.Ref.Namespace, Pod: ps.Ref.Name, Size: ps.vol.Size, Used: ps.vol.Used}
		if n := len(ps.vol.Runs); n > 0 {
			g.Peak = ps.vol.Runs[n-1].Peak
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Pod < out[j].Namespace+"/"+out[j].Pod
	})
	return out
}

// Skipped: the shaped pods whose /dev/shm is not watched, and why ("ns/name: why").
func (w *Watch) Skipped() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, ps := range w.pods {
		if ps.vol == nil && ps.skipped != "" {
			out = append(out, ps.Ref.Namespace+"/"+ps.Ref.Name+": "+ps.skipped)
		}
	}
	sort.Strings(out)
	return out
}
