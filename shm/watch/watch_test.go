package watch

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"podshaper.io/shm/host"
	"podshaper.io/shm/kube"
	"podshaper.io/shm/usage"
)

const (
	adviceTorch = "Raise podshaper.io/batch-bytes (or batch-shape), podshaper.io/dataloader-workers " +
		"or podshaper.io/prefetch-factor to what the DataLoader really holds."
	adviceSize = "Neither NCCL nor the DataLoader fills it: raise podshaper.io/batch-bytes to make room, or mount the pod's own emptyDir at /dev/shm with the sizeLimit it needs (podshaper keeps it as written)."
)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// oneUsage: the one usage handed, which must be urgent or not as said.
func oneUsage(t *testing.T, what string, usages []handedUsage, urgent bool) kube.ShmUsage {
	t.Helper()
	if len(usages) != 1 {
		t.Fatalf("%s: %d usages handed, want 1: %+v", what, len(usages), usages)
	}
	if usages[0].urgent != urgent {
		t.Errorf("%s: usage urgent = %v, want %v", what, usages[0].urgent, urgent)
	}
	return usages[0].u
}

// lastRun: the newest run of a handed usage.
func lastRun(t *testing.T, u kube.ShmUsage) usage.Run {
	t.Helper()
	if len(u.Runs) == 0 {
		t.Fatalf("a usage with no run: %+v", u)
	}
	return u.Runs[len(u.Runs)-1]
}

func none(t *testing.T, what string, s *sink) {
	t.Helper()
	if e, u := s.take(); len(e) > 0 || len(u) > 0 {
		t.Errorf("%s: handed events %+v, usages %+v; want nothing", what, e, u)
	}
}

func TestVolumeOf(t *testing.T) {
	p := shapedPod("train")
	cfg := Config{KubeletRoot: kubeletRoot}
	for _, c := range []struct {
		name     string
		src      string // "" mounts nothing at /dev/shm
		wantName string // "" no volume
		wantUser bool
		wantWhy  string
	}{
		{"podshaper's volume", emptyDir(p, ShmVolume), ShmVolume, false, ""},
		{"the user's own emptyDir", emptyDir(p, "dshm"), "dshm", true, ""},
		{"a hostPath", "/dev/shm", "", false,
			"/dev/shm is /dev/shm on the host, not an emptyDir of the pod: not measured, not cleaned"},
		{"another pod's emptyDir", emptyDir(shapedPod("other"), ShmVolume), "", false,
			"/dev/shm is " + emptyDir(shapedPod("other"), ShmVolume) + " on the host, not an emptyDir of the pod: not measured, not cleaned"},
		{"a configMap", kubeletRoot + "/pods/uid-train/volumes/kubernetes.io~configmap/shm", "", false,
			"/dev/shm is " + kubeletRoot + "/pods/uid-train/volumes/kubernetes.io~configmap/shm on the host, not an emptyDir of the pod: not measured, not cleaned"},
		{"no /dev/shm", "", "", false, ""},
	} {
		v, why := volumeOf(cfg, p.Ref, ctr(p, "main", 1, c.src).Mounts)
		if why != c.wantWhy {
			t.Errorf("%s: why = %q, want %q", c.name, why, c.wantWhy)
		}
		switch {
		case c.wantName == "" && v != nil:
			t.Errorf("%s: volume %+v, want none", c.name, v)
		case c.wantName != "" && v == nil:
			t.Errorf("%s: no volume, want %s", c.name, c.wantName)
		case v != nil && (v.name != c.wantName || v.user != c.wantUser || v.hostPath != c.src):
			t.Errorf("%s: volume %q user=%v at %s, want %q user=%v at %s",
				c.name, v.name, v.user, v.hostPath, c.wantName, c.wantUser, c.src)
		}
	}
}

// A shaped pod whose /dev/shm is not measured: Skipped says why, or nothing when it has no
// /dev/shm; nothing is handed and no gauge shows it. A memory emptyDir is measured.
func TestNotWatched(t *testing.T) {
	p := shapedPod("train")
	for _, c := range []struct {
		name    string
		src     string
		tmpfs   bool
		skipped []string
		watched bool
	}{
		{"a hostPath", "/dev/shm", true,
			[]string{"ml/train: /dev/shm is /dev/shm on the host, not an emptyDir of the pod: not measured, not cleaned"}, false},
		{"no /dev/shm", "", true, nil, false},
		{"an emptyDir on disk", emptyDir(p, ShmVolume), false,
			[]string{"ml/train: /dev/shm is the emptyDir podshaper-dshm, on disk (no medium: Memory): not measured"}, false},
		{"a memory emptyDir", emptyDir(p, ShmVolume), true, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			if c.src != "" {
				f.host.setVolume(c.src, host.Space{Size: 1000 * mi, Tmpfs: c.tmpfs})
			}
			f.w.Start(p, ctr(p, "main", 1, c.src))
			f.w.Tick()
			if got := f.w.Skipped(); !reflect.DeepEqual(got, c.skipped) {
				t.Errorf("%s: Skipped = %q, want %q", c.name, got, c.skipped)
			}
			if g := f.w.Gauges(); len(g) > 0 != c.watched {
				t.Errorf("%s: gauges %+v, watched = %v", c.name, g, c.watched)
			}
			if _, u := f.sink.take(); len(u) > 0 != c.watched {
				t.Errorf("%s: usages %+v, watched = %v", c.name, u, c.watched)
			}
		})
	}
}

// A pod podshaper did not shape is none of podshaper-shm's business.
func TestUnshapedIgnored(t *testing.T) {
	for _, labels := range []map[string]string{nil, {"app": "x"}, {ShapedLabel: "false"}, {ShapedLabel: "True"}, {ShapedLabel: ""}} {
		f := newFixture(t, nil)
		p := shapedPod("train")
		p.Labels = labels
		src := emptyDir(p, ShmVolume)
		f.host.setVolume(src, tmpfs(1000*mi, 950*mi), usage.File{Name: "nccl-a", Bytes: 950 * mi, ChangedAt: at(-10), ID: usage.FileID{Dev: 1, Ino: 1}})
		c := ctr(p, "main", 1, src)
		c.Annotations[restartCountAnnotation] = "1"
		f.w.Sync([]Pod{p}, []Container{c})
		f.w.Create(p, c)
		f.w.Start(p, c)
		f.w.Tick()
		f.w.Stop(p.SandboxID, stopped(c, at(5), 1, "Error"))
		f.w.PodGone(p.SandboxID)
		none(t, fmt.Sprintf("labels %v", labels), f.sink)
		if got := f.host.removedNames(); got != nil {
			t.Errorf("labels %v: removed %v", labels, got)
		}
		if f.host.lists != 0 {
			t.Errorf("labels %v: the volume was listed %d times", labels, f.host.lists)
		}
		if g, s := f.w.Gauges(), f.w.Skipped(); g != nil || s != nil {
			t.Errorf("labels %v: gauges %+v, skipped %q", labels, g, s)
		}
	}
}

func TestRuns(t *testing.T) {
	f := newFixture(t, nil)
	p := shapedPod("train")
	src := emptyDir(p, ShmVolume)
	f.host.setVolume(src, tmpfs(1000*mi, 0))
	c1, c2 := ctr(p, "main", 101, src), ctr(p, "sidecar", 102, src)
	f.alive(101)
	f.alive(102)
	c1.StartedAt = at(0)
	f.w.Start(p, c1)
	_, usages := f.sink.take()
	u := oneUsage(t, "run 1 begins", usages, true)
	want := kube.ShmUsage{Pod: p.Ref, Node: "node-1", Volume: ShmVolume, Size: 1000 * mi, ObservedAt: at(0),
		Runs: []usage.Run{{Number: 1, StartedAt: at(0), Size: 1000 * mi}}}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("run 1 begins:\n got %+v\nwant %+v", u, want)
	}

	f.clock.advance(500 * time.Millisecond)
	c2.StartedAt = f.clock.now()
	f.w.Start(p, c2)
	none(t, "a second container starts in the run", f.sink)

	// Samples: the peak grows, and stays when the use falls.
	for i, s := range []struct {
		used, peak int64
		peakAt     time.Time
		written    bool
	}{
		{100 * mi, 100 * mi, at(1), true},
		{300 * mi, 300 * mi, at(2), true},
		{200 * mi, 300 * mi, at(2), true},  // the use fell by 10%: written, the peak stays
		{200 * mi, 300 * mi, at(2), false}, // nothing changed
		{205 * mi, 300 * mi, at(2), false}, // less than 1% of the size
	} {
		f.clock.t = at(i + 1)
		f.host.setUsed(src, s.used)
		f.w.Tick()
		events, usages := f.sink.take()
		if len(events) > 0 {
			t.Errorf("sample %d: events %+v", i, events)
		}
		if !s.written {
			if len(usages) > 0 {
				t.Errorf("sample %d: handed %+v, want nothing", i, usages)
			}
			continue
		}
		u := oneUsage(t, "a sample", usages, false)
		if r := lastRun(t, u); u.Used != s.used || r.Peak != s.peak || !r.PeakAt.Equal(s.peakAt) || r.Number != 1 || len(u.Runs) != 1 {
			t.Errorf("sample %d: used %d, runs %+v; want used %d, run 1 peak %d at %v", i, u.Used, u.Runs, s.used, s.peak, s.peakAt)
		}
	}
	if g := f.w.Gauges(); !reflect.DeepEqual(g, []Gauge{{namespace, "train", 1000 * mi, 205 * mi, 300 * mi}}) {
		t.Errorf("Gauges = %+v", g)
	}

	// 95%: warned once, with what fills it.
	f.host.setVolume(src, tmpfs(1000*mi, 950*mi),
		usage.File{Name: "nccl-a", Bytes: 300 * mi}, usage.File{Name: "torch_1_2", Bytes: 600 * mi},
		usage.File{Name: "notes", Bytes: 50 * mi})
	f.clock.t = at(10)
	f.w.Tick()
	events, usages := f.sink.take()
	wantWarning := sentEvent{p.Ref, "Warning", "ShmNearlyFull", "/dev/shm is 95% full in run 1: 950Mi of 1000Mi used. " +
		"It holds NCCL segments: 1 file, 300Mi; DataLoader (torch_*): 1 file, 600Mi; other: 1 file, 50Mi. " + adviceTorch}
	if len(events) != 1 || events[0] != wantWarning {
		t.Errorf("at 95%%: events\n %+v\nwant\n %+v", events, wantWarning)
	}
	if r := lastRun(t, oneUsage(t, "at 95%", usages, true)); !r.NearlyFull || r.Peak != 950*mi {
		t.Errorf("at 95%%: run %+v", r)
	}
	for i, used := range []int64{990 * mi, 900 * mi, 999 * mi} {
		f.clock.t = at(11 + i)
		f.host.setUsed(src, used)
		f.w.Tick()
		if events, _ := f.sink.take(); len(events) > 0 {
			t.Errorf("warned again in run 1 at %d: %+v", used, events)
		}
	}

	// The first container stops while the second runs: the run goes on. The second stops:
	// the run ends, told with its peak and how the first ended.
	f.w.Stop(p.SandboxID, stopped(c1, at(20), 1, "Error"))
	none(t, "one of two containers stops", f.sink)
	f.w.Stop(p.SandboxID, stopped(c2, at(21), 0, ""))
	events, usages = f.sink.take()
	wantEnd := sentEvent{p.Ref, "Normal", "ShmUsage", "peak 999Mi of 1000Mi (99%) in run 1 (Error (exit 1)): " +
		"/dev/shm was just enough or too small for this run. " + adviceTorch + " At the end it held " +
		"NCCL segments: 1 file, 300Mi; DataLoader (torch_*): 1 file, 600Mi; other: 1 file, 50Mi."}
	if len(events) != 1 || events[0] != wantEnd {
		t.Errorf("run 1 ends: events\n %+v\nwant\n %+v", events, wantEnd)
	}
	wantRun1 := usage.Run{Number: 1, StartedAt: at(0), EndedAt: at(21), Size: 1000 * mi, Peak: 999 * mi, PeakAt: at(13),
		NearlyFull: true, Ended: "Error (exit 1)"}
	if r := lastRun(t, oneUsage(t, "run 1 ends", usages, true)); r != wantRun1 {
		t.Errorf("run 1 ends:\n got %+v\nwant %+v", r, wantRun1)
	}
	f.w.Stop(p.SandboxID, stopped(c2, at(21), 0, ""))
	none(t, "a stop told twice", f.sink)

	// The next start is run 2, and it is warned again.
	f.host.setVolume(src, tmpfs(1000*mi, 0))
	c1 = ctr(p, "main", 103, src)
	c1.StartedAt = at(30)
	f.alive(103)
	f.w.Start(p, c1)
	_, usages = f.sink.take()
	u = oneUsage(t, "run 2 begins", usages, true)
	if len(u.Runs) != 2 || u.Runs[0] != wantRun1 || u.Runs[1] != (usage.Run{Number: 2, StartedAt: at(30), Size: 1000 * mi}) {
		t.Errorf("run 2 begins: runs %+v", u.Runs)
	}
	f.host.setUsed(src, 900*mi)
	f.clock.t = at(31)
	f.w.Tick()
	if events, _ := f.sink.take(); len(events) != 1 || !strings.HasPrefix(events[0].message, "/dev/shm is 90% full in run 2: 900Mi of 1000Mi used.") {
		t.Errorf("run 2 at 90%%: events %+v", events)
	}
}

// A container whose process is gone ends its run though the runtime did not tell; its
// stop is the one a restart cleans after.
func TestTickEndsRunOfGoneProcess(t *testing.T) {
	f := newFixture(t, nil)
	p := shapedPod("train")
	src := emptyDir(p, ShmVolume)
	f.host.setVolume(src, tmpfs(983*mi, 412*mi))
	c1, c2 := ctr(p, "main", 201, src), ctr(p, "sidecar", 202, src)
	f.alive(201)
	f.alive(202)
	f.w.Start(p, c1)
	f.w.Start(p, c2)
	f.clock.t = at(1)
	f.w.Tick()
	f.sink.take()

	f.gone(201)
	f.clock.t = at(4)
	f.w.Tick()
	none(t, "one of two processes gone", f.sink)
	f.gone(202)
	f.clock.t = at(5)
	f.w.Tick()
	events, usages := f.sink.take()
	wantEnd := sentEvent{p.Ref, "Normal", "ShmUsage",
		"peak 412Mi of 983Mi (41%) in run 1 (Stopped): /dev/shm could be 495Mi (peak + 20% headroom)."}
	if len(events) != 1 || events[0] != wantEnd {
		t.Errorf("events\n %+v\nwant\n %+v", events, wantEnd)
	}
	if r := lastRun(t, oneUsage(t, "the run ends", usages, true)); !r.EndedAt.Equal(at(5)) || r.Ended != "Stopped" {
		t.Errorf("run %+v", r)
	}
	f.clock.t = at(6)
	f.w.Tick()
	none(t, "the next tick", f.sink)

	// Restarted: what changed before the tick that saw main gone (at 4) is its dead run's.
	f.host.setVolume(src, tmpfs(983*mi, 2*mi),
		usage.File{Name: "nccl-old", Bytes: mi, ChangedAt: at(3), ID: usage.FileID{Dev: 1, Ino: 1}},
		usage.File{Name: "nccl-new", Bytes: mi, ChangedAt: at(4), ID: usage.FileID{Dev: 1, Ino: 2}})
	c1 = ctr(p, "main", 203, src)
	c1.Annotations[restartCountAnnotation] = "1"
	f.clock.t = at(7)
	f.w.Create(p, c1)
	if got := f.host.removedNames(); !slices.Equal(got, []string{"nccl-old"}) {
		t.Errorf("removed %v, want nccl-old", got)
	}
}

// The files a dead run left, removed before its container starts again.
func TestCreateCleans(t *testing.T) {
	id := func(n uint64) usage.FileID { return usage.FileID{Dev: 7, Ino: n} }
	files := []usage.File{
		{Name: "nccl-dead", Bytes: 32 * mi, ChangedAt: at(1), ID: id(1)},
		{Name: "torch_dead", Bytes: 8 * mi, ChangedAt: at(2), ID: id(2)},
		{Name: "nccl-held", Bytes: 32 * mi, ChangedAt: at(3), ID: id(3)},      // a sidecar's, open
		{Name: "nccl-at-stop", Bytes: 32 * mi, ChangedAt: at(10), ID: id(4)},  // changed as it stopped
		{Name: "torch_new", Bytes: 8 * mi, ChangedAt: at(11), ID: id(5)},      // the new run's
		{Name: "torch_new_held", Bytes: 8 * mi, ChangedAt: at(12), ID: id(6)}, // the sidecar's since
	}
	held := map[usage.FileID]bool{id(3): true, id(6): true}
	const removedBoth = "removed 2 files (40Mi) a dead run left in /dev/shm before run 2 started: " +
		"NCCL segments: 1 file, 32Mi; DataLoader (torch_*): 1 file, 8Mi. Kept 1 file still open or mapped in the pod."
	for _, c := range []struct {
		name       string
		restarts   string // the container's restart count annotation; "-" none
		change     func(*Config)
		user       bool // the pod's own emptyDir
		heldErr    error
		removeCost time.Duration
		unseen     bool // podshaper-shm did not see the container stop
		removed    []string
		event      string
	}{
		{name: "the first start", restarts: "0"},
		{name: "no restart count", restarts: "-"},
		{name: "a restart", restarts: "1", removed: []string{"nccl-dead", "torch_dead"}, event: removedBoth},
		{name: "the fifth restart", restarts: "5", removed: []string{"nccl-dead", "torch_dead"}, event: removedBoth},
		{name: "cleaning off", restarts: "1", change: func(c *Config) { c.Clean = false }},
		{name: "the user's volume", restarts: "1", user: true},
		{name: "the user's volume, cleaned", restarts: "1", user: true,
			change: func(c *Config) { c.CleanUserVolumes = true }, removed: []string{"nccl-dead", "torch_dead"}, event: removedBoth},
		{name: "what is held unknown", restarts: "1", heldErr: errors.New("reading /proc failed")},
		{name: "past the deadline", restarts: "1", removeCost: time.Second, removed: []string{"nccl-dead"},
			event: "removed 1 file (32Mi) a dead run left in /dev/shm before run 2 started: NCCL segments: 1 file, 32Mi. " +
				"Kept 1 file still open or mapped in the pod. Removal stopped at its deadline: 1 file left."},
		{name: "its stop not seen", restarts: "1", unseen: true,
			removed: []string{"nccl-dead", "torch_dead", "nccl-at-stop", "torch_new"},
			event: "removed 4 files (80Mi) a dead run left in /dev/shm before run 1 started: " +
				"NCCL segments: 2 files, 64Mi; DataLoader (torch_*): 2 files, 16Mi. Kept 2 files still open or mapped in the pod."},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.change)
			p := shapedPod("train")
			vol := ShmVolume
			if c.user {
				vol = "dshm"
			}
			src := emptyDir(p, vol)
			f.host.setVolume(src, tmpfs(1000*mi, 0))
			f.host.held, f.host.heldErr, f.host.removeCost = held, c.heldErr, c.removeCost
			c1 := ctr(p, "main", 301, src)
			if !c.unseen {
				f.w.Start(p, c1)
				f.w.Stop(p.SandboxID, stopped(c1, at(10), 1, "Error"))
			}
			f.host.setVolume(src, tmpfs(1000*mi, 128*mi), files...)
			f.sink.take()

			c1 = ctr(p, "main", 302, src)
			if c.restarts == "-" {
				delete(c1.Annotations, restartCountAnnotation)
			} else {
				c1.Annotations[restartCountAnnotation] = c.restarts
			}
			f.clock.t = at(20)
			f.w.Create(p, c1)
			if got := f.host.removedNames(); !slices.Equal(got, c.removed) {
				t.Errorf("%s: removed %v, want %v", c.name, got, c.removed)
			}
			events, usages := f.sink.take()
			if len(usages) > 0 {
				t.Errorf("%s: usages handed %+v", c.name, usages)
			}
			var want []sentEvent
			if c.event != "" {
				want = []sentEvent{{p.Ref, "Normal", "ShmLeftoversRemoved", c.event}}
			}
			if !reflect.DeepEqual(events, want) {
				t.Errorf("%s: events\n %+v\nwant\n %+v", c.name, events, want)
			}
		})
	}
}

// Nothing to remove: nothing told.
func TestCreateNothingLeft(t *testing.T) {
	f := newFixture(t, nil)
	p := shapedPod("train")
	src := emptyDir(p, ShmVolume)
	f.host.setVolume(src, tmpfs(1000*mi, 0), usage.File{Name: "nccl-held", ChangedAt: at(1), ID: usage.FileID{Dev: 1, Ino: 1}})
	f.host.held = map[usage.FileID]bool{{Dev: 1, Ino: 1}: true}
	c := ctr(p, "main", 1, src)
	c.Annotations[restartCountAnnotation] = "2"
	f.clock.t = at(5)
	f.w.Create(p, c)
	if got := f.host.removedNames(); got != nil {
		t.Errorf("removed %v", got)
	}
	none(t, "only a held file", f.sink)
}

// podshaper-shm (re)connects: a running container continues the run the API kept open,
// with its peak; else a run begins.
func TestSync(t *testing.T) {
	p := shapedPod("train")
	src := emptyDir(p, ShmVolume)
	run1 := usage.Run{Number: 1, StartedAt: at(-3600), EndedAt: at(-1800), Size: 1000 * mi, Peak: 100 * mi,
		PeakAt: at(-3000), Ended: "Completed"}
	open2 := usage.Run{Number: 2, StartedAt: at(-1700), Size: 1000 * mi, Peak: 800 * mi, PeakAt: at(-60), NearlyFull: true}
	ended2 := open2
	ended2.EndedAt, ended2.Ended = at(-30), "Completed"
	for _, c := range []struct {
		name    string
		api     *kube.ShmUsage
		getErr  error
		running bool
		// when Sync tells something: the run it ended (nil none) and the run it began (0 none)
		ended *usage.Run
		began int
		// the run that the container's stop at at(10) ends, and its Event
		stopRun int
		stopMsg string
	}{
		{name: "an open run continues", running: true,
			api:     &kube.ShmUsage{Pod: p.Ref, Volume: ShmVolume, Size: 1000 * mi, Runs: []usage.Run{run1, open2}},
			stopRun: 2, stopMsg: "peak 800Mi of 1000Mi (80%) in run 2 (Completed): /dev/shm could be 960Mi (peak + 20% headroom)."},
		{name: "no open run", running: true,
			api:   &kube.ShmUsage{Pod: p.Ref, Volume: ShmVolume, Size: 1000 * mi, Runs: []usage.Run{run1, ended2}},
			began: 3, stopRun: 3, stopMsg: "peak 50Mi of 1000Mi (5%) in run 3 (Completed): /dev/shm could be 60Mi (peak + 20% headroom)."},
		{name: "no ShmUsage", running: true, began: 1, stopRun: 1,
			stopMsg: "peak 50Mi of 1000Mi (5%) in run 1 (Completed): /dev/shm could be 60Mi (peak + 20% headroom)."},
		{name: "the API unread", running: true, getErr: errors.New("forbidden"), began: 1, stopRun: 1,
			stopMsg: "peak 50Mi of 1000Mi (5%) in run 1 (Completed): /dev/shm could be 60Mi (peak + 20% headroom)."},
		{name: "another volume's", running: true,
			api:   &kube.ShmUsage{Pod: p.Ref, Volume: "dshm", UserVolume: true, Size: 1000 * mi, Runs: []usage.Run{run1, open2}},
			began: 1, stopRun: 1, stopMsg: "peak 50Mi of 1000Mi (5%) in run 1 (Completed): /dev/shm could be 60Mi (peak + 20% headroom)."},
		{name: "an open run whose container stopped", running: false,
			api: &kube.ShmUsage{Pod: p.Ref, Volume: ShmVolume, Size: 1000 * mi, Runs: []usage.Run{run1, open2}},
			ended: &usage.Run{Number: 2, StartedAt: at(-1700), EndedAt: at(-5), Size: 1000 * mi, Peak: 800 * mi,
				PeakAt: at(-60), NearlyFull: true, Ended: "Error (exit 1)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.host.setVolume(src, tmpfs(1000*mi, 50*mi))
			if c.api != nil {
				f.kube.usages[p.Ref] = c.api
			}
			f.kube.getErr = c.getErr
			c1 := ctr(p, "main", 401, src)
			c1.StartedAt = at(-1700)
			if !c.running {
				c1 = stopped(c1, at(-5), 1, "Error")
			}
			f.alive(401)
			unshaped := shapedPod("web")
			unshaped.Labels = nil
			f.w.Sync([]Pod{p, unshaped}, []Container{ctr(unshaped, "web", 9, emptyDir(unshaped, ShmVolume)), c1})

			events, usages := f.sink.take()
			if c.getErr != nil {
				// Nothing of the pod is written until its ShmUsage is read: each tick tries again.
				if len(usages) > 0 {
					t.Errorf("%s: handed %+v before the ShmUsage was read", c.name, usages)
				}
				f.w.Tick()
				if _, usages = f.sink.take(); len(usages) > 0 {
					t.Errorf("%s: handed %+v while the ShmUsage cannot be read", c.name, usages)
				}
				f.kube.getErr = nil
				f.w.Tick()
				events, usages = f.sink.take()
			}
			switch {
			case c.ended != nil:
				wantEnd := "peak 800Mi of 1000Mi (80%) in run 2 (Error (exit 1)): /dev/shm could be 960Mi (peak + 20% headroom)."
				if len(events) != 1 || events[0].reason != "ShmUsage" || events[0].message != wantEnd {
					t.Errorf("%s: events %+v, want the end of run 2: %q", c.name, events, wantEnd)
				}
				if r := lastRun(t, oneUsage(t, c.name, usages, true)); r != *c.ended {
					t.Errorf("%s: run\n %+v\nwant\n %+v", c.name, r, *c.ended)
				}
			case c.began > 0:
				if len(events) > 0 {
					t.Errorf("%s: events %+v", c.name, events)
				}
				u := oneUsage(t, c.name, usages, true)
				if r := lastRun(t, u); r.Number != c.began || !r.EndedAt.IsZero() || !r.StartedAt.Equal(at(-1700)) {
					t.Errorf("%s: run %+v, want run %d open since the container started", c.name, r, c.began)
				}
			default:
				if len(events) > 0 || len(usages) > 0 {
					t.Errorf("%s: handed events %+v, usages %+v; want nothing", c.name, events, usages)
				}
			}
			if c.stopRun == 0 {
				return
			}
			f.clock.t = at(1)
			f.w.Tick()
			if events, _ := f.sink.take(); len(events) > 0 {
				t.Errorf("%s: a tick told %+v", c.name, events)
			}
			f.w.Stop(p.SandboxID, stopped(c1, at(10), 0, ""))
			events, usages = f.sink.take()
			want := []sentEvent{{p.Ref, "Normal", "ShmUsage", c.stopMsg}}
			if !reflect.DeepEqual(events, want) {
				t.Errorf("%s: at the stop\n %+v\nwant\n %+v", c.name, events, want)
			}
			if r := lastRun(t, oneUsage(t, c.name, usages, true)); r.Number != c.stopRun || !r.EndedAt.Equal(at(10)) {
				t.Errorf("%s: run %+v, want run %d ended", c.name, r, c.stopRun)
			}
		})
	}
}

// After Sync found the run over, the restarted container cleans after it and begins the next.
func TestSyncThenRestart(t *testing.T) {
	f := newFixture(t, nil)
	p := shapedPod("train")
	src := emptyDir(p, ShmVolume)
	f.kube.usages[p.Ref] = &kube.ShmUsage{Pod: p.Ref, Volume: ShmVolume, Size: 1000 * mi,
		Runs: []usage.Run{{Number: 4, StartedAt: at(-100), Size: 1000 * mi, Peak: 900 * mi, PeakAt: at(-50)}}}
	f.host.setVolume(src, tmpfs(1000*mi, 96*mi),
		usage.File{Name: "nccl-a", Bytes: 32 * mi, ChangedAt: at(-20), ID: usage.FileID{Dev: 1, Ino: 1}},
		usage.File{Name: "nccl-b", Bytes: 32 * mi, ChangedAt: at(-8), ID: usage.FileID{Dev: 1, Ino: 2}})
	c := stopped(ctr(p, "main", 501, src), at(-10), 1, "Error")
	f.w.Sync([]Pod{p}, []Container{c})
	f.sink.take()

	c = ctr(p, "main", 502, src)
	c.Annotations[restartCountAnnotation] = "3"
	c.StartedAt = at(0)
	f.w.Create(p, c)
	f.w.Start(p, c)
	if got := f.host.removedNames(); !slices.Equal(got, []string{"nccl-a"}) {
		t.Errorf("removed %v, want what changed before the stop Sync saw", got)
	}
	events, usages := f.sink.take()
	if len(events) != 1 || !strings.Contains(events[0].message, "before run 5 started") {
		t.Errorf("events %+v", events)
	}
	if r := lastRun(t, oneUsage(t, "run 5 begins", usages, true)); r.Number != 5 || !r.StartedAt.Equal(at(0)) {
		t.Errorf("run %+v, want run 5", r)
	}
}

func TestPodGone(t *testing.T) {
	f := newFixture(t, nil)
	train, eval := shapedPod("train"), shapedPod("eval")
	for _, p := range []Pod{train, eval} {
		f.host.setVolume(emptyDir(p, ShmVolume), tmpfs(983*mi, 0))
		f.w.Start(p, ctr(p, "main", 0, emptyDir(p, ShmVolume)))
	}
	f.host.setUsed(emptyDir(train, ShmVolume), 412*mi)
	f.host.setUsed(emptyDir(eval, ShmVolume), 20*mi)
	f.clock.t = at(1)
	f.w.Tick()
	f.host.setUsed(emptyDir(train, ShmVolume), 300*mi)
	f.clock.t = at(2)
	f.w.Tick()
	want := []Gauge{{namespace, "eval", 983 * mi, 20 * mi, 20 * mi}, {namespace, "train", 983 * mi, 300 * mi, 412 * mi}}
	if g := f.w.Gauges(); !reflect.DeepEqual(g, want) {
		t.Errorf("Gauges =\n %+v\nwant\n %+v", g, want)
	}
	f.sink.take()

	f.clock.t = at(30)
	f.w.PodGone(train.SandboxID)
	events, usages := f.sink.take()
	wantEnd := []sentEvent{{train.Ref, "Normal", "ShmUsage",
		"peak 412Mi of 983Mi (41%) in run 1 (Pod stopped): /dev/shm could be 495Mi (peak + 20% headroom)."}}
	if !reflect.DeepEqual(events, wantEnd) {
		t.Errorf("events\n %+v\nwant\n %+v", events, wantEnd)
	}
	if r := lastRun(t, oneUsage(t, "the pod goes", usages, true)); !r.EndedAt.Equal(at(30)) || r.Ended != "Pod stopped" {
		t.Errorf("run %+v", r)
	}
	if g := f.w.Gauges(); !reflect.DeepEqual(g, want[:1]) {
		t.Errorf("Gauges after the pod went = %+v", g)
	}
	f.clock.t = at(31)
	f.w.PodGone(train.SandboxID)
	f.w.Tick()
	none(t, "after the pod went", f.sink)
}

func TestHowEnded(t *testing.T) {
	for _, c := range []struct {
		exit   int32
		reason string
		want   string
	}{
		{0, "", "Completed"},
		{0, "Completed", "Completed"},
		{1, "Error", "Error (exit 1)"},
		{137, "", "Error (exit 137)"},
		{137, "OOMKilled", "OOMKilled"},
		{0, "Error", "Error (exit 0)"},
	} {
		if got := howEnded(Container{ExitCode: c.exit, Reason: c.reason}); got != c.want {
			t.Errorf("howEnded(exit %d, %q) = %q, want %q", c.exit, c.reason, got, c.want)
		}
	}
}

// 64 pods sampled every second for a minute while nothing changes: nothing is handed
// beyond each run's beginning, and no volume is listed.
func TestNothingChangesNothingWritten(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 64 {
		p := shapedPod("rank-" + string(rune('a'+i/26)) + string(rune('a'+i%26)))
		src := emptyDir(p, ShmVolume)
		f.host.setVolume(src, tmpfs(1000*mi, int64(i+1)*mi))
		f.w.Start(p, ctr(p, "main", uint32(1000+i), src))
		f.alive(uint32(1000 + i))
	}
	if _, usages := f.sink.take(); len(usages) != 64 {
		t.Fatalf("%d usages at the starts, want 64", len(usages))
	}
	for range 60 {
		f.clock.advance(time.Second)
		f.w.Tick()
	}
	events, usages := f.sink.take()
	if len(events) > 0 || len(usages) > 0 {
		t.Errorf("nothing changed, yet %d events and %d usages were handed", len(events), len(usages))
	}
	if f.host.lists != 0 {
		t.Errorf("volumes listed %d times", f.host.lists)
	}
	if len(f.w.Gauges()) != 64 {
		t.Errorf("%d gauges", len(f.w.Gauges()))
	}
}

// A container restarted while a native sidecar on the same volume keeps running: its
// restart ends the run (told how it died) and begins the next; its dead run's NCCL and torch
// files go, the sidecar's closed file of no known kind stays.
func TestRestartBesideASidecar(t *testing.T) {
	f := newFixture(t, nil)
	p := shapedPod("train")
	src := emptyDir(p, ShmVolume)
	f.host.setVolume(src, tmpfs(1000*mi, 0))
	side, main := ctr(p, "holder", 601, src), ctr(p, "trainer", 602, src)
	f.alive(601)
	f.alive(602)
	f.w.Start(p, side)
	f.w.Start(p, main)
	f.sink.take()
	f.host.setUsed(src, 104*mi)
	f.clock.t = at(5)
	f.w.Tick()
	f.sink.take()

	f.w.Stop(p.SandboxID, stopped(main, at(8), 1, "Error"))
	none(t, "the trainer died, the sidecar runs", f.sink)
	id := func(n uint64) usage.FileID { return usage.FileID{Dev: 3, Ino: n} }
	f.host.setVolume(src, tmpfs(1000*mi, 104*mi),
		usage.File{Name: "nccl-run1-1", Bytes: 32 * mi, ChangedAt: at(6), ID: id(1)},
		usage.File{Name: "torch_17_1", Bytes: 8 * mi, ChangedAt: at(7), ID: id(2)},
		usage.File{Name: "sidecar-notes", Bytes: mi, ChangedAt: at(2), ID: id(3)},
		usage.File{Name: "held-by-sidecar", Bytes: 4096, ChangedAt: at(1), ID: id(4)})
	f.host.held = map[usage.FileID]bool{id(4): true}
	again := ctr(p, "trainer", 603, src)
	again.Annotations[restartCountAnnotation] = "1"
	f.clock.t = at(9)
	f.w.Create(p, again)
	if got := f.host.removedNames(); !slices.Equal(got, []string{"nccl-run1-1", "torch_17_1"}) {
		t.Errorf("removed %v, want the dead run's NCCL and torch files only", got)
	}
	events, _ := f.sink.take()
	if len(events) != 1 || events[0].reason != ReasonLeftoversRemoved ||
		!strings.HasPrefix(events[0].message, "removed 2 files (40Mi) a dead run left in /dev/shm before run 2 started") {
		t.Errorf("events %+v", events)
	}
	again.StartedAt = at(10)
	f.alive(603)
	f.w.Start(p, again)
	events, usages := f.sink.take()
	want := "peak 104Mi of 1000Mi (10%) in run 1 (Error (exit 1)): /dev/shm could be 125Mi (peak + 20% headroom)."
	if len(events) != 1 || events[0].reason != ReasonUsage || !strings.HasPrefix(events[0].message, want) {
		t.Errorf("the restart: events %+v, want run 1's end %q", events, want)
	}
	if len(usages) != 2 || lastRun(t, usages[1].u).Number != 2 || !lastRun(t, usages[1].u).StartedAt.Equal(at(10)) {
		t.Errorf("the restart: usages %+v, want run 1 ended then run 2 begun at 10", usages)
	}
}

// The runtime tells a container's exit asynchronously: when its restart is created first,
// the dead instance is taken as stopped now, and what it left goes.
func TestCreateBeforeTheStopIsTold(t *testing.T) {
	f := newFixture(t, nil)
	p, src := f.started(0, 701)
	f.host.setVolume(src, tmpfs(1000*mi, 32*mi),
		usage.File{Name: "nccl-x", Bytes: 32 * mi, ChangedAt: at(20), ID: usage.FileID{Dev: 1, Ino: 9}})
	again := ctr(p, "trainer", 702, src)
	again.Annotations[restartCountAnnotation] = "1"
	f.clock.t = at(21)
	f.w.Create(p, again)
	if got := f.host.removedNames(); !slices.Equal(got, []string{"nccl-x"}) {
		t.Errorf("removed %v, want nccl-x", got)
	}
	events, _ := f.sink.take()
	if len(events) != 2 || events[0].reason != ReasonUsage || events[1].reason != ReasonLeftoversRemoved ||
		!strings.Contains(events[0].message, "in run 1 (Restarted)") ||
		!strings.Contains(events[1].message, "before run 2 started") {
		t.Errorf("events %+v, want run 1 ended (Restarted), then the removal before run 2", events)
	}
}

// podshaper-shm connects again (containerd restarted): a pod no longer listed is forgotten,
// its open run ended; its series go.
func TestSyncForgetsPodsGone(t *testing.T) {
	f := newFixture(t, nil)
	f.started(10*mi, 801)
	f.clock.t = at(30)
	f.w.Sync(nil, nil)
	events, _ := f.sink.take()
	if len(events) != 1 || !strings.Contains(events[0].message, "in run 1 (Pod stopped)") {
		t.Errorf("events %+v, want run 1 ended as the pod stopped", events)
	}
	if g := f.w.Gauges(); len(g) != 0 {
		t.Errorf("gauges %+v after the pod went", g)
	}
}

// A container restarted while podshaper-shm was away: the run the API kept open ended at
// the dead instance's stop, and the new instance's run begins at its start.
func TestSyncAfterARestartUnseen(t *testing.T) {
	f := newFixture(t, nil)
	p := shapedPod("train")
	src := emptyDir(p, ShmVolume)
	f.host.setVolume(src, tmpfs(1000*mi, 20*mi))
	f.kube.usages[p.Ref] = &kube.ShmUsage{Pod: p.Ref, Volume: ShmVolume, Size: 1000 * mi,
		Runs: []usage.Run{{Number: 3, StartedAt: at(-100), Size: 1000 * mi, Peak: 700 * mi, PeakAt: at(-80)}}}
	dead := stopped(ctr(p, "trainer", 901, src), at(-50), 1, "Error")
	dead.StartedAt = at(-100)
	alive := ctr(p, "trainer", 902, src)
	alive.ID, alive.StartedAt = "c-902", at(-40)
	f.alive(902)
	f.w.Sync([]Pod{p}, []Container{dead, alive})
	events, usages := f.sink.take()
	if len(events) != 1 || !strings.HasPrefix(events[0].message, "peak 700Mi of 1000Mi (70%) in run 3 (Error (exit 1))") {
		t.Errorf("events %+v, want run 3's end with its kept peak", events)
	}
	u := usages[len(usages)-1].u
	if n := len(u.Runs); n != 2 || !u.Runs[0].EndedAt.Equal(at(-50)) || u.Runs[1].Number != 4 || !u.Runs[1].StartedAt.Equal(at(-40)) {
		t.Errorf("runs %+v, want run 3 ended at -50 and run 4 begun at -40", u.Runs)
	}
}

// started: pod "train" with its 1000Mi volume at use `used`, its container "trainer" (pid)
// started, what that told taken from the sink.
func (f *fixture) started(used int64, pid uint32) (Pod, string) {
	p := shapedPod("train")
	src := emptyDir(p, ShmVolume)
	f.host.setVolume(src, tmpfs(1000*mi, used))
	f.alive(pid)
	f.w.Start(p, ctr(p, "trainer", pid, src))
	f.sink.take()
	return p, src
}

// storedByTheAPI: a handed usage as the API server gives it back (times in microseconds).
func storedByTheAPI(u kube.ShmUsage) *kube.ShmUsage {
	u.Runs = append([]usage.Run(nil), u.Runs...)
	for i := range u.Runs {
		u.Runs[i].StartedAt = u.Runs[i].StartedAt.Truncate(time.Microsecond)
	}
	return &u
}

// containerd restarted: podshaper-shm, which followed the pod's run since it began,
// connects again and reads what it wrote itself. The run goes on: no second run.
func TestReconnectKeepsTheRunItFollowed(t *testing.T) {
	f := newFixture(t, nil)
	p := shapedPod("train")
	src := emptyDir(p, ShmVolume)
	f.host.setVolume(src, tmpfs(161*mi, 32*mi))
	c := ctr(p, "main", 0, src)
	c.StartedAt = at(0).Add(123456789 * time.Nanosecond) // the API keeps microseconds only
	f.w.Start(p, c)
	f.clock.t = at(1)
	f.w.Tick()
	_, usages := f.sink.take()
	f.kube.usages[p.Ref] = storedByTheAPI(oneUsage(t, "run 1 begins", usages, true))

	c.Running = true
	f.w.Sync([]Pod{p}, []Container{c})
	f.clock.t = at(2)
	f.w.Tick()
	_, usages = f.sink.take()
	for _, got := range usages {
		if len(got.u.Runs) != 1 || !got.u.Runs[0].EndedAt.IsZero() {
			t.Errorf("after the reconnect: runs %+v, want run 1 still open", got.u.Runs)
		}
	}
	if g := f.w.Gauges(); len(g) != 1 {
		t.Errorf("gauges %+v", g)
	}
}

// The same after a container restart seen live: the API holds runs 1 (ended) and 2 (open),
// written by this process; a reconnect keeps both, once each.
func TestReconnectKeepsEveryRunItFollowed(t *testing.T) {
	f := newFixture(t, nil)
	p := shapedPod("train")
	src := emptyDir(p, ShmVolume)
	f.host.setVolume(src, tmpfs(161*mi, 32*mi))
	first := ctr(p, "main", 0, src)
	first.StartedAt = at(0).Add(123456789 * time.Nanosecond)
	f.w.Start(p, first)
	f.clock.t = at(5)
	f.w.Stop(p.SandboxID, stopped(first, at(5), 1, "Error"))
	second := ctr(p, "main", 0, src)
	second.ID = "ctr-2"
	second.StartedAt = at(6).Add(987654321 * time.Nanosecond)
	f.w.Start(p, second)
	f.clock.t = at(7)
	f.w.Tick()
	_, usages := f.sink.take()
	if len(usages) == 0 {
		t.Fatal("no usage handed")
	}
	stored := storedByTheAPI(usages[len(usages)-1].u)
	if len(stored.Runs) != 2 {
		t.Fatalf("before the reconnect: runs %+v, want 2", stored.Runs)
	}
	f.kube.usages[p.Ref] = stored

	second.Running = true
	f.w.Sync([]Pod{p}, []Container{stopped(first, at(5), 1, "Error"), second})
	f.clock.t = at(8)
	f.w.Tick()
	_, usages = f.sink.take()
	for _, got := range usages {
		r := got.u.Runs
		if len(r) != 2 || r[0].Number != 1 || r[1].Number != 2 || r[0].EndedAt.IsZero() || !r[1].EndedAt.IsZero() ||
			r[0].EndedAt.Before(r[0].StartedAt) {
			t.Errorf("after the reconnect: runs %+v, want run 1 ended, run 2 open", r)
		}
	}
}
