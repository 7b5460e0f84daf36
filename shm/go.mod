// podshaper-shm: the node component that measures each shaped pod's /dev/shm and clears
// what a dead run left there before the next run starts (docs/shm.md). Go, because
// containerd's NRI SDK is Go (docs/design.md).
module podshaper.io/shm

go 1.24.0

require (
	github.com/containerd/nri v0.12.3
	github.com/containerd/ttrpc v1.2.7
)
