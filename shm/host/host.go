// Package host is podshaper-shm's access to the node: statfs of a volume, its files, the
// files the pod's live processes hold open or map, and removing files. Behind an interface
// (Host) so that the decisions above it run in tests without a node. Linux only.
package host

import (
	"errors"
	"time"

	"podshaper.io/shm/memlock"
	"podshaper.io/shm/usage"
)

// Space is a volume's statfs, in bytes.
type Space struct {
	Size, Used int64
	Tmpfs      bool // f_type is TMPFS_MAGIC (a memory-backed emptyDir)
}

// Listing is what one bounded read of a volume's directory saw.
type Listing struct {
	Files   []usage.File
	Partial bool // stopped at the bound: more entries are there
}

// Host is everything podshaper-shm reads or changes on the node.
type Host interface {
	// Statfs of a volume's host path.
	Statfs(path string) (Space, error)
	// List reads at most max entries of the volume's top directory (regular files only;
	// names, st_blocks×512, ctime, dev/ino): bounded work however many files are there.
	List(path string, max int) (Listing, error)
	// Held: the files (dev, ino) that processes of the pod hold open (/proc/PID/fd) or map
	// (/proc/PID/maps). The pod's processes are those whose /proc/PID/cgroup names the
	// pod's cgroup (pod<uid>, or pod<uid with _> under systemd). Processes and fds that go
	// away while read are skipped; a process of the pod that may not be read is an error
	// (ErrNoPtrace), so that no file it may hold is taken for unheld.
	Held(podUID string) (map[usage.FileID]bool, error)
	// Remove removes these files of the volume (by name, only if still a regular file of the
	// same dev/ino), stopping at deadline; it returns what it removed and how many it did not
	// reach. A file it could not remove is an error after it tried the rest.
	Remove(path string, files []usage.File, deadline time.Time) (removed []usage.File, notReached int, err error)
	// Memlock: the RLIMIT_MEMLOCK of a process (its /proc/PID/limits).
	Memlock(pid uint32) (memlock.Limit, error)
}

// ErrNoPtrace is Held's error when a process of the pod could not be read: the files it
// holds are unknown.
var ErrNoPtrace = errors.New("podshaper-shm lacks CAP_SYS_PTRACE")
