// Package usage holds podshaper-shm's decisions, pure: what kind of file a name in /dev/shm
// is, a volume's runs and their peaks, the 90% threshold, which files a dead run left,
// how often the API may be written, and the words of the Events. No filesystem, no clock,
// no API: the callers pass what they read and the time.
package usage

import "time"

// Kind is what a file in /dev/shm belongs to, from its name only.
type Kind int

const (
	KindNCCL   Kind = iota // nccl-*: NCCL's proxy pools and SHM transport segments
	KindTorch              // torch_*: PyTorch's shared tensors (the DataLoader's batches)
	KindOpenMP             // __KMP_REGISTERED_LIB_*: Intel OpenMP's registration
	KindPSM                // psm_shm.*, psm2_shm.* (PSM/PSM2), vader*/sm_segment.* (Open MPI)
	KindOther
	NumKinds
)

// NearlyFullFraction: a run's use at or above this fraction of the size is warned once.
const NearlyFullFraction = 0.9

// Headroom the advice adds to a peak: /dev/shm could be peak × (1 + Headroom), in Mi.
const Headroom = 0.2

// RunsKept: the runs a volume keeps (and the API object lists), newest last.
const RunsKept = 10

// File is one entry of a volume, as the host read it.
type File struct {
	Name      string
	Bytes     int64     // st_blocks × 512: what it takes from the tmpfs
	ChangedAt time.Time // st_ctime
	ID        FileID
}

// FileID is a file's device and inode: what a process's fd and maps name.
type FileID struct{ Dev, Ino uint64 }

// Tally counts files and bytes by kind.
type Tally struct {
	Files   [NumKinds]int
	Bytes   [NumKinds]int64
	Partial bool // the listing stopped before the end (bounded work): the counts are a floor
}

// Run is one run of a volume: from a (re)start of the containers that mount it to the end
// of one of them.
type Run struct {
	Number     int // 1, 2, ...
	StartedAt  time.Time
	EndedAt    time.Time // zero while it runs
	Size       int64     // the volume's size (statfs) during the run
	Peak       int64     // the largest use sampled
	PeakAt     time.Time
	NearlyFull bool   // ShmNearlyFull was told for this run
	Ended      string // how it ended: "Completed", "Error (exit 1)", "" while running
}
