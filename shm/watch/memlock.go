package watch

import (
	"errors"
	"sync"

	"podshaper.io/shm/memlock"
)

// memlocks is what podshaper-shm told of memlocks not applied, so that each is told once:
// a hold, by pod UID and container name, until that container starts; a container
// started without it, by container id, until it stops or its pod goes. Kept across
// reconnections to the runtime (a Synchronize again tells nothing twice).
type memlocks struct {
	mu      sync.Mutex
	held    map[heldKey]string // → sandbox id
	checked map[string]string  // container id → sandbox id
}

type heldKey struct{ uid, container string }

func newMemlocks() memlocks {
	return memlocks{held: map[heldKey]string{}, checked: map[string]string{}}
}

// Validate is asked by the runtime once every NRI plugin adjusted a container, before it
// exists: adjusted are the rlimits of their final adjustment (each with the plugin that set
// it), plugins those the runtime consulted ("90-podshaper-shm"). A container of a shaped pod
// whose ulimit annotation asks a memlock it would not get is refused, with an error that
// begins with memlock.Marker, and its pod is told once per hold (a Warning
// MemlockNotApplied); the kubelet tries the creation again. Nothing is refused without
// HoldMemlock, for an unshaped pod, or when the annotation asks no memlock or cannot be read.
func (w *Watch) Validate(p Pod, c Container, adjusted []memlock.Rlimit, plugins []string) error {
	if !w.cfg.HoldMemlock {
		return nil
	}
	check, ok := w.memlockCheck(p, c.Name)
	if !ok {
		return nil
	}
	check.Got = memlock.Effective(adjusted, c.Rlimits, w.cfg.RuntimeMemlock)
	if check.Applied() {
		return nil
	}
	m := &w.memlocks
	key := heldKey{p.Ref.UID, c.Name}
	m.mu.Lock()
	_, told := m.held[key]
	m.held[key] = p.SandboxID
	m.mu.Unlock()
	if !told {
		w.log.Warn("holding a container back: its memlock is not applied", "pod", p.Ref.Namespace+"/"+p.Ref.Name,
			"container", c.Name, "asked", check.Asked.Words(), "got", check.Got.Words())
		w.sink.Event(p.Ref, eventTypeWarning, memlock.Reason, memlock.HeldMessage(check))
	}
	return errors.New(memlock.HoldError(check, plugins))
}

// The agent's memlock-probe container (manifests/base/agent.yaml) asks what shaped pods ask:
// held back like theirs, it starts once the node applies it, rather than reporting for good
// the default it would get on a node whose ulimit plugin registers after it (a reboot).
const (
	agentNameLabel        = "app.kubernetes.io/name"
	agentName             = "podshaper-agent"
	memlockProbeContainer = "memlock-probe"
)

func agentProbe(p Pod, container string) bool {
	return p.Labels[agentNameLabel] == agentName && container == memlockProbeContainer
}

// memlockCheck: the check of the container of pod p, when p is shaped (or it is the agent's
// memlock-probe) and its annotation asks a memlock for it.
func (w *Watch) memlockCheck(p Pod, container string) (memlock.Check, bool) {
	if !Shaped(p.Labels) && !agentProbe(p, container) {
		return memlock.Check{}, false
	}
	asked, ok, err := memlock.AskedOf(p.Annotations, container)
	if err != nil {
		// The ulimit plugin refuses the container itself, saying why.
		w.log.Debug("memlock not checked", "pod", p.Ref.Namespace+"/"+p.Ref.Name, "container", container, "error", err)
		return memlock.Check{}, false
	}
	return memlock.Check{Node: w.cfg.Node, Container: container, Asked: asked}, ok
}

// checkStarted reads the RLIMIT_MEMLOCK of a running container of a shaped pod whose
// annotation asks one, once per container; when it is not what was asked, the pod is told
// (a Warning MemlockNotApplied). A container that started is no longer held back: a later
// hold is told again.
func (w *Watch) checkStarted(p Pod, c Container) {
	m := &w.memlocks
	m.mu.Lock()
	delete(m.held, heldKey{p.Ref.UID, c.Name})
	m.mu.Unlock()
	check, ok := w.memlockCheck(p, c.Name)
	if !ok || c.Pid == 0 {
		return
	}
	m.mu.Lock()
	_, done := m.checked[c.ID]
	m.checked[c.ID] = p.SandboxID
	m.mu.Unlock()
	if done {
		return
	}
	got, err := w.host.Memlock(c.Pid)
	if err != nil {
		// Not checked: the next start notice or reconnect reads it again.
		m.mu.Lock()
		delete(m.checked, c.ID)
		m.mu.Unlock()
		w.log.Warn("reading a container's memlock failed", "pod", p.Ref.Namespace+"/"+p.Ref.Name, "container", c.Name, "error", err)
		return
	}
	check.Got = memlock.Got{Limit: got, Source: memlock.FromProcess}
	if got == w.cfg.RuntimeMemlock {
		check.Source = memlock.FromDefault
	}
	if check.Applied() {
		return
	}
	w.log.Warn("a container started without its memlock", "pod", p.Ref.Namespace+"/"+p.Ref.Name,
		"container", c.Name, "asked", check.Asked.Words(), "got", check.Got.Words())
	w.sink.Event(p.Ref, eventTypeWarning, memlock.Reason, memlock.StartedMessage(check))
}

// syncMemlocks checks the running containers of shaped pods when podshaper-shm connects
// (again): those it has checked are not told again; what is gone is forgotten.
func (w *Watch) syncMemlocks(pods []Pod, ctrs []Container) {
	byID := map[string]Pod{}
	for _, p := range pods {
		byID[p.SandboxID] = p
	}
	running := map[string]bool{}
	for _, c := range ctrs {
		if c.Running {
			running[c.ID] = true
		}
	}
	m := &w.memlocks
	m.mu.Lock()
	for id := range m.checked {
		if !running[id] {
			delete(m.checked, id)
		}
	}
	for k, sandbox := range m.held {
		if _, ok := byID[sandbox]; !ok {
			delete(m.held, k)
		}
	}
	m.mu.Unlock()
	for _, c := range ctrs {
		if p, ok := byID[c.SandboxID]; ok && c.Running {
			w.checkStarted(p, c)
		}
	}
}

// memlockStopped forgets a stopped container.
func (w *Watch) memlockStopped(id string) {
	w.memlocks.mu.Lock()
	delete(w.memlocks.checked, id)
	w.memlocks.mu.Unlock()
}

// memlockPodGone forgets a pod's containers.
func (w *Watch) memlockPodGone(sandboxID string) {
	m := &w.memlocks
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, sandbox := range m.held {
		if sandbox == sandboxID {
			delete(m.held, k)
		}
	}
	for id, sandbox := range m.checked {
		if sandbox == sandboxID {
			delete(m.checked, id)
		}
	}
}
