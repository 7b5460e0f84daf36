// Package usage holds podshaper-shm's decisions, pure: what kind of file a name in /dev/shm
// is, a volume's runs and their peaks, the 90% threshold, which files a dead run left,
// how often the API may be written, and the words of the Events. No filesystem, no clock,
// no API: the callers pass what they read and the time.
package usage

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

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

// kindPrefixes: the name prefixes of each kind but KindOther.
var kindPrefixes = [...]struct {
	prefix string
	kind   Kind
}{
	{"nccl-", KindNCCL},
	{"torch_", KindTorch},
	{"__KMP_REGISTERED_LIB_", KindOpenMP},
	{"psm_shm.", KindPSM},
	{"psm2_shm.", KindPSM},
	{"vader", KindPSM},
	{"sm_segment.", KindPSM},
}

// KindOf tells a file's kind by its name.
func KindOf(name string) Kind {
	for _, p := range kindPrefixes {
		if strings.HasPrefix(name, p.prefix) {
			return p.kind
		}
	}
	return KindOther
}

var kindNames = [NumKinds]string{"NCCL", "torch", "OpenMP", "PSM/MPI", "other"}

// String: "NCCL", "torch", "OpenMP", "PSM/MPI", "other"; "Kind(7)" for a number that is no kind.
func (k Kind) String() string {
	if k < 0 || k >= NumKinds {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// kindWords: each kind as the Events say it.
var kindWords = [NumKinds]string{
	"NCCL segments",
	"DataLoader (torch_*)",
	"OpenMP (__KMP_REGISTERED_LIB_*)",
	"PSM/MPI segments",
	"other",
}

// TallyOf counts files by kind; partial says the listing was cut short.
func TallyOf(files []File, partial bool) Tally {
	t := Tally{Partial: partial}
	for _, f := range files {
		k := KindOf(f.Name)
		t.Files[k]++
		t.Bytes[k] += f.Bytes
	}
	return t
}

// Total files and bytes of a tally.
func (t Tally) Total() (files int, bytes int64) {
	for k := range NumKinds {
		files += t.Files[k]
		bytes += t.Bytes[k]
	}
	return files, bytes
}

// Words: "NCCL segments: 3 files, 96Mi; DataLoader (torch_*): 2 files, 40Mi; other: 1 file, 1Mi",
// kinds in Kind's order, kinds with no file left out, bytes as Quantity writes them. When
// Partial, "at least " comes before each kind's counts ("NCCL segments: at least 3 files,
// 96Mi"). Empty: "nothing", or "nothing counted (the listing stopped early)" when Partial.
func (t Tally) Words() string {
	at := ""
	if t.Partial {
		at = "at least "
	}
	var parts []string
	for k := range NumKinds {
		if t.Files[k] == 0 {
			continue
		}
		parts = append(parts, kindWords[k]+": "+at+fileCount(t.Files[k])+", "+Quantity(t.Bytes[k]))
	}
	switch {
	case len(parts) > 0:
		return strings.Join(parts, "; ")
	case t.Partial:
		return "nothing counted (the listing stopped early)"
	default:
		return "nothing"
	}
}

// fileCount: "1 file", "3 files".
func fileCount(n int) string {
	if n == 1 {
		return "1 file"
	}
	return strconv.Itoa(n) + " files"
}
