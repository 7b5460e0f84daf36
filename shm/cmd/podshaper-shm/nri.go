package main

import (
	"context"
	"time"

	"github.com/containerd/nri/pkg/api"

	"podshaper.io/shm/kube"
	"podshaper.io/shm/watch"
)

// plugin is podshaper-shm's NRI plugin: it changes no container; it only hears of them.
// The runtime waits for CreateContainer (a restarted container's dead run is cleared
// there, before it can start); the other events return at once.
type plugin struct {
	w      *watch.Watch
	synced func() // told at each Synchronize: ready
}

func podOf(p *api.PodSandbox) watch.Pod {
	return watch.Pod{
		SandboxID: p.GetId(),
		Ref:       kube.PodRef{Namespace: p.GetNamespace(), Name: p.GetName(), UID: p.GetUid()},
		Labels:    p.GetLabels(),
	}
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
	return watch.Container{
		ID: c.GetId(), Name: c.GetName(), SandboxID: c.GetPodSandboxId(), Pid: c.GetPid(),
		Running:     c.GetState() == api.ContainerState_CONTAINER_RUNNING,
		Mounts:      mounts,
		Annotations: c.GetAnnotations(),
		StartedAt:   nanos(c.GetStartedAt()),
		FinishedAt:  nanos(c.GetFinishedAt()),
		ExitCode:    c.GetExitCode(),
		Reason:      c.GetStatusReason(),
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
