// shm-bench measures what podshaper-shm's access to the node costs (docs/shm.md): sampling
// the statfs of 64 volumes every second, as a share of one core against the 1% ceiling, and
// one bounded sweep (List, Statfs) of a volume holding 1,000,000 files, with a full /proc
// scan (Held). Run it as root to measure on tmpfs mounts of its own; otherwise it uses
// directories on /dev/shm.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"podshaper.io/shm/host"
)

func main() {
	seconds := flag.Int("seconds", 20, "how long to sample, in seconds")
	volumes := flag.Int("volumes", 64, "volumes sampled")
	files := flag.Int("files", 1000000, "files in the volume swept once (0: no sweep)")
	max := flag.Int("list", 100000, "the bound of the one List")
	flag.Parse()
	defer func() {
		if err := recover(); err != nil {
			fmt.Fprintln(os.Stderr, "shm-bench:", err)
			os.Exit(1)
		}
	}()

	base, err := os.MkdirTemp("", "shm-bench-")
	check(err)
	defer os.RemoveAll(base)

	vols := make([]volume, *volumes)
	for i := range vols {
		vols[i] = newVolume(filepath.Join(base, fmt.Sprint(i)), "size=64m")
		defer vols[i].remove()
	}
	sample(vols, time.Duration(*seconds)*time.Second)

	if *files > 0 {
		v := newVolume(filepath.Join(base, "many"), "size=1g,nr_inodes=0")
		defer v.remove()
		sweep(v, *files, *max)
	}
}

// volume is a tmpfs mounted at path, or a directory on /dev/shm where mounting is not
// allowed.
type volume struct {
	path    string
	mounted bool
}

func newVolume(path, options string) volume {
	check(os.Mkdir(path, 0o700))
	if err := syscall.Mount("tmpfs", path, "tmpfs", 0, options); err == nil {
		return volume{path, true}
	}
	dir, err := os.MkdirTemp("/dev/shm", "shm-bench-")
	check(err)
	return volume{dir, false}
}

// kind says what the volume is.
func (v volume) kind() string {
	if v.mounted {
		return "a tmpfs mount"
	}
	return "a directory on /dev/shm"
}

func (v volume) remove() {
	if v.mounted {
		check(syscall.Unmount(v.path, 0))
		return
	}
	check(os.RemoveAll(v.path))
}

// sample statfs'es every volume once a second for d and prints the CPU time this process
// spent against the wall time, and how long one sweep took.
func sample(vols []volume, d time.Duration) {
	h := host.Node("/proc")
	var sweeps []time.Duration
	cpu0, wall0 := cpuTime(), time.Now()
	tick := time.NewTicker(time.Second)
	for range tick.C {
		t := time.Now()
		for _, v := range vols {
			_, err := h.Statfs(v.path)
			check(err)
		}
		sweeps = append(sweeps, time.Since(t))
		if time.Since(wall0) >= d {
			break
		}
	}
	tick.Stop()
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	share := 100 * cpu.Seconds() / wall.Seconds()
	fmt.Printf("shm-bench: sampling %d volumes (each %s) every 1s for %.0fs: %.3f%% of one core (ceiling 1%%: %.3fx)\n",
		len(vols), vols[0].kind(), wall.Seconds(), share, share/1)
	slices.Sort(sweeps)
	fmt.Printf("shm-bench: one sweep of %d statfs: %d µs (median of %d; fastest %d µs, slowest %d µs)\n",
		len(vols), sweeps[len(sweeps)/2].Microseconds(), len(sweeps),
		sweeps[0].Microseconds(), sweeps[len(sweeps)-1].Microseconds())
}

// sweep fills v with n empty files, then times one Statfs, one List bounded at max and
// one Held of a pod with no processes here (every process's cgroup read).
func sweep(v volume, n, max int) {
	t := time.Now()
	for i := range n {
		fd, err := syscall.Open(filepath.Join(v.path, fmt.Sprintf("torch_%07d", i)),
			syscall.O_CREAT|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o600)
		check(err)
		check(syscall.Close(fd))
	}
	fmt.Printf("shm-bench: %d empty files made in one volume (%s) in %.1fs (not counted)\n",
		n, v.kind(), time.Since(t).Seconds())
	h := host.Node("/proc")

	t = time.Now()
	sp, err := h.Statfs(v.path)
	check(err)
	fmt.Printf("shm-bench: Statfs of it: %d µs (used %d bytes)\n", time.Since(t).Microseconds(), sp.Used)

	t = time.Now()
	l, err := h.List(v.path, max)
	check(err)
	fmt.Printf("shm-bench: List of it bounded at %d: %d ms (%d files, partial %v)\n",
		max, time.Since(t).Milliseconds(), len(l.Files), l.Partial)

	procs, err := filepath.Glob("/proc/[0-9]*")
	check(err)
	t = time.Now()
	held, err := h.Held("00000000-0000-0000-0000-000000000000")
	check(err)
	fmt.Printf("shm-bench: Held of a pod with no processes (%d processes read): %d µs (%d files)\n",
		len(procs), time.Since(t).Microseconds(), len(held))
}

// cpuTime is the user and system time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// check panics with err, so that main's deferred calls unmount what it mounted.
func check(err error) {
	if err != nil {
		panic(err)
	}
}
