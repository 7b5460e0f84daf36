package watch

import (
	"strings"
	"testing"

	"podshaper.io/shm/memlock"
)

const (
	memlockKey = memlock.AnnotationPrefix + "train"
	mib        = uint64(1 << 20)
)

var (
	asked4Mi       = memlock.Limit{Soft: 4 * mib, Hard: 4 * mib}
	runtimeDefault = memlock.Limit{Soft: 8 * mib, Hard: 8 * mib}
)

// memlockFixture is a Watch that holds containers back, on a runtime whose default is 8Mi.
func memlockFixture(t testing.TB, hold bool) *fixture {
	return newFixture(t, func(c *Config) { c.HoldMemlock, c.RuntimeMemlock = hold, runtimeDefault })
}

// askingPod is a shaped pod whose annotation asks 4Mi for its container "train", as the
// webhook writes it.
func askingPod(name string) Pod {
	p := shapedPod(name)
	p.Annotations = map[string]string{memlockKey: "- type: RLIMIT_MEMLOCK\n  soft: 4194304\n  hard: 4194304\n"}
	return p
}

// memlockEvents: the MemlockNotApplied Events handed since the last take (others dropped).
func memlockEvents(s *sink) []sentEvent {
	events, _ := s.take()
	var out []sentEvent
	for _, e := range events {
		if e.reason == memlock.Reason {
			out = append(out, e)
		}
	}
	return out
}

func byPlugin(soft, hard uint64, plugin string) []memlock.Rlimit {
	return []memlock.Rlimit{{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 1024, By: plugin},
		{Type: "RLIMIT_MEMLOCK", Soft: soft, Hard: hard, By: plugin}}
}

func TestValidateDecides(t *testing.T) {
	unshaped := askingPod("plain")
	unshaped.Labels = map[string]string{"app": "plain"}
	noMemlock := shapedPod("other")
	noMemlock.Annotations = map[string]string{memlockKey: "- {type: nofile, soft: 1024, hard: 1024}"}
	unreadable := shapedPod("broken")
	unreadable.Annotations = map[string]string{memlockKey: "- {type: memlock, soft: 4Mi, hard: 4Mi}"}
	withSpec := ctr(askingPod("train"), "train", 1, "")
	withSpec.Rlimits = []memlock.Rlimit{{Type: "RLIMIT_MEMLOCK", Soft: 4 * mib, Hard: 4 * mib}}
	for _, c := range []struct {
		name     string
		hold     bool
		pod      Pod
		ctr      Container
		adjusted []memlock.Rlimit
		want     string // "" not refused; else what the error says, after the marker
	}{
		{"applied by the ulimit plugin", true, askingPod("train"), ctr(askingPod("train"), "train", 1, ""),
			byPlugin(4*mib, 4*mib, "10-ulimit-adjuster"), ""},
		{"not applied: the runtime's default", true, askingPod("train"), ctr(askingPod("train"), "train", 1, ""), nil,
			"node node-1 did not apply RLIMIT_MEMLOCK 4Mi that " + memlockKey + " asks (it would get 8Mi, the runtime's default; " +
				"no NRI plugin set it; NRI plugins here: 90-podshaper-shm). podshaper-shm holds the container back until the " +
				"node applies it; the kubelet tries again. Fix: start the node's NRI ulimit-adjuster plugin."},
		{"applied less", true, askingPod("train"), ctr(askingPod("train"), "train", 1, ""), byPlugin(2*mib, 4*mib, "50-policy"),
			"(it would get soft 2Mi, hard 4Mi, set by NRI plugin 50-policy; NRI plugins here: 90-podshaper-shm)"},
		{"a later plugin's adjustment over the spec", true, askingPod("train"), withSpec, byPlugin(2*mib, 2*mib, "95-late"),
			"it would get 2Mi, set by NRI plugin 95-late"},
		{"its spec, no plugin", true, askingPod("train"), withSpec, nil, ""},
		{"another container of the pod", true, askingPod("train"), ctr(askingPod("train"), "sidecar", 1, ""), nil, ""},
		{"unshaped", true, unshaped, ctr(unshaped, "train", 1, ""), nil, ""},
		{"no memlock asked", true, noMemlock, ctr(noMemlock, "train", 1, ""), nil, ""},
		{"an annotation the ulimit plugin refuses", true, unreadable, ctr(unreadable, "train", 1, ""), nil, ""},
		{"hold off", false, askingPod("train"), ctr(askingPod("train"), "train", 1, ""), nil, ""},
	} {
		f := memlockFixture(t, c.hold)
		err := f.w.Validate(c.pod, c.ctr, c.adjusted, []string{"90-podshaper-shm"})
		events := memlockEvents(f.sink)
		if c.want == "" {
			if err != nil || len(events) > 0 {
				t.Errorf("%s: refused (%v), events %+v; want neither", c.name, err, events)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), memlock.Marker) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v\nwant %q after %q", c.name, err, c.want, memlock.Marker)
		}
		if len(events) != 1 || events[0].typ != "Warning" || !strings.HasPrefix(events[0].message, "container train is held back: node node-1") {
			t.Errorf("%s: events %+v, want one Warning held back", c.name, events)
		}
	}
}

// TestMemlockHeldToldOnce: the kubelet retries a held container's creation every ~10 s;
// its pod is told once per hold, again only after it started once and was held again.
func TestMemlockHeldToldOnce(t *testing.T) {
	f := memlockFixture(t, true)
	p := askingPod("train")
	c := ctr(p, "train", 7, "")
	for range 3 {
		if err := f.w.Validate(p, c, nil, nil); err == nil {
			t.Fatal("not held back")
		}
	}
	if e := memlockEvents(f.sink); len(e) != 1 || e[0].message != "container train is held back: node node-1 did not apply "+
		"RLIMIT_MEMLOCK 4Mi ("+memlockKey+"); it would get 8Mi, the runtime's default. It starts as soon as the node applies it "+
		"(the kubelet retries). Fix: start the node's NRI ulimit-adjuster plugin." {
		t.Fatalf("after 3 tries: %+v, want one Event", e)
	}
	// podshaper-shm reconnects (containerd restarted) while the container is still held.
	f.w.Sync([]Pod{p}, nil)
	if err := f.w.Validate(p, c, nil, nil); err == nil || len(memlockEvents(f.sink)) != 0 {
		t.Fatalf("after a reconnection: %v, told again", err)
	}
	// The node applies it: the container starts with it.
	if err := f.w.Validate(p, c, byPlugin(4*mib, 4*mib, "10-ulimit"), nil); err != nil {
		t.Fatal(err)
	}
	f.host.setMemlock(7, asked4Mi)
	f.w.Start(p, c)
	if e := memlockEvents(f.sink); len(e) != 0 {
		t.Fatalf("started with it: %+v", e)
	}
	// It crashes; the ulimit plugin is away when it is created again: a new hold, told.
	f.w.Stop(p.SandboxID, stopped(c, at(10), 1, "Error"))
	c2 := ctr(p, "train", 8, "")
	for range 2 {
		if err := f.w.Validate(p, c2, nil, nil); err == nil {
			t.Fatal("not held back")
		}
	}
	if e := memlockEvents(f.sink); len(e) != 1 {
		t.Fatalf("held again: %d Events, want 1", len(e))
	}
	// The pod goes while held: forgotten.
	f.w.PodGone(p.SandboxID)
	if n := len(f.w.memlocks.held) + len(f.w.memlocks.checked); n != 0 {
		t.Errorf("%d entries kept of a pod gone", n)
	}
}

// TestMemlockStartedWithout: a container that started without what was asked (created
// while podshaper-shm was away, or the hold off) is told once per container instance: at
// its start or when podshaper-shm connects, never again when it reconnects.
func TestMemlockStartedWithout(t *testing.T) {
	f := memlockFixture(t, false)
	p := askingPod("train")
	c := ctr(p, "train", 7, "")
	f.host.setMemlock(7, runtimeDefault)
	f.w.Start(p, c)
	want := "container train started with RLIMIT_MEMLOCK 8Mi (the runtime's default), not the 4Mi that " + memlockKey +
		" asks: node node-1 did not apply it. Fix: start the node's NRI ulimit-adjuster plugin, then restart the pod once the node applies it."
	if e := memlockEvents(f.sink); len(e) != 1 || e[0].typ != "Warning" || e[0].message != want || e[0].pod != p.Ref {
		t.Fatalf("at start: %+v\nwant one Warning %q", e, want)
	}
	f.w.Start(p, c) // told again by the runtime
	for range 2 {   // containerd restarts; podshaper-shm reconnects
		f.w.Sync([]Pod{p}, []Container{c})
	}
	if e := memlockEvents(f.sink); len(e) != 0 {
		t.Fatalf("told again: %+v", e)
	}
	// It restarts (a new instance) with a limit set elsewhere: told, saying what it got.
	f.w.Stop(p.SandboxID, stopped(c, at(10), 1, "Error"))
	c2 := ctr(p, "train", 8, "")
	f.host.setMemlock(8, memlock.Limit{Soft: 2 * mib, Hard: memlock.Unlimited})
	f.w.Start(p, c2)
	if e := memlockEvents(f.sink); len(e) != 1 || !strings.HasPrefix(e[0].message, "container train started with RLIMIT_MEMLOCK soft 2Mi, hard unlimited, not the 4Mi") {
		t.Fatalf("the new instance: %+v", e)
	}
}

// TestMemlockSync: podshaper-shm was away when the containers were created: when it
// connects, the running ones of shaped pods that ask a memlock are read, once.
func TestMemlockSync(t *testing.T) {
	f := memlockFixture(t, true)
	good, bad, plain := askingPod("good"), askingPod("bad"), askingPod("plain")
	plain.Labels = nil
	cGood, cBad, cPlain := ctr(good, "train", 1, ""), ctr(bad, "train", 2, ""), ctr(plain, "train", 3, "")
	cDone := stopped(ctr(bad, "train", 4, ""), at(1), 0, "Completed")
	cDone.ID = "train-done"
	f.host.setMemlock(1, asked4Mi)
	f.host.setMemlock(2, runtimeDefault)
	f.host.setMemlock(3, runtimeDefault)
	pods, ctrs := []Pod{good, bad, plain}, []Container{cGood, cBad, cPlain, cDone}
	f.w.Sync(pods, ctrs)
	e := memlockEvents(f.sink)
	if len(e) != 1 || e[0].pod != bad.Ref || !strings.HasPrefix(e[0].message, "container train started with RLIMIT_MEMLOCK 8Mi") {
		t.Fatalf("after connecting: %+v, want one for %s", e, bad.Ref.Name)
	}
	if f.host.memlockReads != 2 {
		t.Errorf("%d limits read, want 2 (the shaped pods' running containers)", f.host.memlockReads)
	}
	f.w.Sync(pods, ctrs)
	f.w.Start(bad, cBad)
	if e := memlockEvents(f.sink); len(e) != 0 || f.host.memlockReads != 2 {
		t.Errorf("after reconnecting: %+v, %d reads", e, f.host.memlockReads)
	}
	// A process that cannot be read: nothing told, and read again at the next notice (a
	// failed read must not leave a container unchecked for good).
	gone := askingPod("gone")
	f.w.Start(gone, ctr(gone, "train", 99, ""))
	f.w.Sync(append(pods, gone), append(ctrs, ctr(gone, "train", 99, "")))
	if e := memlockEvents(f.sink); len(e) != 0 || f.host.memlockReads != 4 {
		t.Errorf("a process not there: %+v, %d reads", e, f.host.memlockReads)
	}
	// Containers no longer there are forgotten.
	f.w.Sync(nil, nil)
	if n := len(f.w.memlocks.checked); n != 0 {
		t.Errorf("%d containers kept after they went", n)
	}
}

// BenchmarkValidate: what deciding one container costs podshaper-shm (the runtime waits
// for it at each creation).
func BenchmarkValidate(b *testing.B) {
	unshaped := askingPod("plain")
	unshaped.Labels = map[string]string{"app": "plain"}
	for _, c := range []struct {
		name     string
		pod      Pod
		adjusted []memlock.Rlimit
	}{
		{"unshaped", unshaped, nil},
		{"shaped-applied", askingPod("train"), byPlugin(4*mib, 4*mib, "10-ulimit-adjuster")},
		{"shaped-held", askingPod("train"), nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := memlockFixture(b, true)
			ct := ctr(c.pod, "train", 1, "")
			plugins := []string{"10-ulimit-adjuster", "90-podshaper-shm"}
			b.ReportAllocs()
			for range b.N {
				_ = f.w.Validate(c.pod, ct, c.adjusted, plugins)
			}
		})
	}
}

// The agent's memlock-probe is held back like a shaped container (a node rebooting, its
// ulimit plugin registering after the agent's pod), so that it reports once the node
// applies the memlock; nothing else of the agent's pod, and no other pod's memlock-probe.
func TestValidateHoldsTheAgentsProbe(t *testing.T) {
	agentPod := func(labels map[string]string) Pod {
		p := shapedPod("podshaper-agent-x7k2p")
		p.Labels = labels
		p.Annotations = map[string]string{memlock.AnnotationPrefix + "memlock-probe": "- {type: memlock, soft: 4194304, hard: 4194304}"}
		return p
	}
	agent := agentPod(map[string]string{"app.kubernetes.io/name": "podshaper-agent"})
	other := agentPod(map[string]string{"app.kubernetes.io/name": "something-else"})
	f := memlockFixture(t, true)
	err := f.w.Validate(agent, ctr(agent, "memlock-probe", 1, ""), nil, []string{"90-podshaper-shm"})
	if err == nil || !strings.HasPrefix(err.Error(), memlock.Marker) {
		t.Errorf("the agent's probe without its memlock: %v, want held", err)
	}
	if err := f.w.Validate(agent, ctr(agent, "agent", 1, ""), nil, nil); err != nil {
		t.Errorf("the agent's own container: %v", err)
	}
	if err := f.w.Validate(other, ctr(other, "memlock-probe", 1, ""), nil, nil); err != nil {
		t.Errorf("another pod's memlock-probe: %v", err)
	}
	if err := f.w.Validate(agent, ctr(agent, "memlock-probe", 1, ""), byPlugin(4*mib, 4*mib, "10-ulimit"), nil); err != nil {
		t.Errorf("the agent's probe with its memlock: %v", err)
	}
}
