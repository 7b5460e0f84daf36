package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/nri/pkg/api"
	"golang.org/x/mod/semver"

	"podshaper.io/shm/kube"
	"podshaper.io/shm/memlock"
	"podshaper.io/shm/watch"
)

// plugin is podshaper-shm's NRI plugin: it changes no container; it only hears of them.
// The runtime waits for CreateContainer (a restarted container's dead run is cleared
// there, before it can start); the other events return at once.
type plugin struct {
	w      *watch.Watch
	synced func() // told at each Synchronize: ready
}

// validator is the plugin that also validates each container's final adjustment, with
// --hold-memlock: the runtime asks it once every plugin adjusted the container, before the
// container exists, and does not create one it refuses.
type validator struct {
	*plugin
	runtimeNRI func() string // the runtime's NRI version, as the stub knows it at Configure
	tooOld     string        // why the runtime cannot take a validator, when it cannot
}

// validatorsSince is the first NRI that asks validators (containerd v2.2.0's); an older
// runtime refuses a plugin that asks to validate.
const validatorsSince = "v0.10.0"

// asksValidators says whether a runtime's NRI version asks validators; an unknown one is
// taken as older.
func asksValidators(nriVersion string) bool {
	return semver.IsValid(nriVersion) && semver.Compare(nriVersion, validatorsSince) >= 0
}

// Configure refuses a runtime whose NRI does not ask validators (connect then connects
// again without the hold); else podshaper-shm subscribes to every event it handles.
func (v *validator) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	if nri := v.runtimeNRI(); !asksValidators(nri) {
		v.tooOld = fmt.Sprintf("%s %s has NRI %s, which asks no validators (from %s on)", runtime, version, nri, validatorsSince)
		return 0, errors.New(v.tooOld)
	}
	return 0, nil
}

func podOf(p *api.PodSandbox) watch.Pod {
	return watch.Pod{
		SandboxID:   p.GetId(),
		Ref:         kube.PodRef{Namespace: p.GetNamespace(), Name: p.GetName(), UID: p.GetUid()},
		Labels:      p.GetLabels(),
		Annotations: p.GetAnnotations(),
	}
}

func rlimitOf(l *api.POSIXRlimit, by string) memlock.Rlimit {
	return memlock.Rlimit{Type: l.GetType(), Soft: l.GetSoft(), Hard: l.GetHard(), By: by}
}

func nanos(n int64) time.Time {
	if n <= 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func containerOf(c *api.Container) watch.Container {
	mounts := map[string]string{}
	for _, m := range c.GetMounts() {
		mounts[m.GetDestination()] = m.GetSource()
	}
	var rlimits []memlock.Rlimit
	for _, l := range c.GetRlimits() {
		rlimits = append(rlimits, rlimitOf(l, ""))
	}
	return watch.Container{
		ID: c.GetId(), Name: c.GetName(), SandboxID: c.GetPodSandboxId(), Pid: c.GetPid(),
		Running:     c.GetState() == api.ContainerState_CONTAINER_RUNNING,
		Mounts:      mounts,
		Annotations: c.GetAnnotations(),
		StartedAt:   nanos(c.GetStartedAt()),
		FinishedAt:  nanos(c.GetFinishedAt()),
		ExitCode:    c.GetExitCode(),
		Reason:      c.GetStatusReason(),
		Rlimits:     rlimits,
	}
}

func (p *plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	ps := make([]watch.Pod, 0, len(pods))
	for _, x := range pods {
		ps = append(ps, podOf(x))
	}
	cs := make([]watch.Container, 0, len(ctrs))
	for _, x := range ctrs {
		cs = append(cs, containerOf(x))
	}
	p.w.Sync(ps, cs)
	p.synced()
	return nil, nil
}

func (p *plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	p.w.Create(podOf(pod), containerOf(c))
	return nil, nil, nil
}

func (p *plugin) PostStartContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) error {
	p.w.Start(podOf(pod), containerOf(c))
	return nil
}

func (p *plugin) StopContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) ([]*api.ContainerUpdate, error) {
	p.w.Stop(pod.GetId(), containerOf(c))
	return nil, nil
}

func (p *plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.w.PodGone(pod.GetId())
	return nil
}

func (p *plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.w.PodGone(pod.GetId())
	return nil
}

// ValidateContainerAdjustment: the container as it was asked for, the adjustment of every
// plugin together (each rlimit with the plugin that set it) and the plugins consulted.
func (v *validator) ValidateContainerAdjustment(_ context.Context, req *api.ValidateContainerAdjustmentRequest) error {
	c := containerOf(req.GetContainer())
	var adjusted []memlock.Rlimit
	for _, l := range req.GetAdjust().GetRlimits() {
		by := ""
		if o := req.GetOwners(); o != nil {
			by, _ = o.RlimitOwner(c.ID, l.GetType())
		}
		adjusted = append(adjusted, rlimitOf(l, by))
	}
	plugins := make([]string, 0, len(req.GetPlugins()))
	for _, p := range req.GetPlugins() {
		plugins = append(plugins, p.GetIndex()+"-"+p.GetName())
	}
	return v.w.Validate(podOf(req.GetPod()), c, adjusted, plugins)
}
