// Package kube is podshaper-shm's narrow API client: the Events it tells on pods and the
// ShmUsage objects it keeps (crds/shmusages.podshaper.io.yaml), over HTTPS with the pod's
// service account (in-cluster), nothing else. No client-go: three calls do not need it.
package kube

import (
	"time"

	"podshaper.io/shm/usage"
)

// PodRef names a pod.
type PodRef struct{ Namespace, Name, UID string }

// ShmUsage is one pod's /dev/shm as measured on its node: the object's spec and status.
type ShmUsage struct {
	Pod        PodRef
	Node       string
	Volume     string // the volume's name in the pod (podshaper-dshm, or the user's own)
	UserVolume bool   // the pod's own emptyDir at /dev/shm, not podshaper's
	Size, Used int64
	ObservedAt time.Time
	Runs       []usage.Run // the last usage.RunsKept, newest last
}

// Client is what podshaper-shm writes and reads.
type Client interface {
	// Event tells one core/v1 Event on the pod (type Normal or Warning, reason, message),
	// reportingComponent podshaper-shm, reportingInstance and source.host the node.
	Event(pod PodRef, typ, reason, message string) error
	// GetUsage reads the pod's ShmUsage (named after the pod, in its namespace): nil, nil
	// when there is none or it belongs to an earlier pod of that name (another UID).
	GetUsage(pod PodRef) (*ShmUsage, error)
	// PutUsage writes it: created (owned by the Pod, so that it goes with it) when absent,
	// else its status replaced (the status subresource); one of an earlier pod of the same
	// name is replaced (the admission policy refuses that for one of another node's pods:
	// the garbage collector removes it with its pod).
	PutUsage(u *ShmUsage) error
}
