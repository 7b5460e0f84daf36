package host

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"podshaper.io/shm/memlock"
	"podshaper.io/shm/usage"
)

// helperEnv makes the test binary a helper process (see TestMain): "map FILE" maps FILE,
// closes it, says "ready" and waits for stdin to close; "held PROCROOT UID" prints Held's
// answer.
const helperEnv = "PODSHAPER_HOST_TEST_HELPER"

func TestMain(m *testing.M) {
	args := strings.Fields(os.Getenv(helperEnv))
	if len(args) == 0 {
		os.Exit(m.Run())
	}
	switch args[0] {
	case "map":
		f, err := os.Open(args[1])
		if err != nil {
			panic(err)
		}
		if _, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ, syscall.MAP_SHARED); err != nil {
			panic(err)
		}
		f.Close()
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
	case "held":
		held, err := Node(args[1]).Held(args[2])
		if err != nil {
			fmt.Println("error:", err)
		} else {
			fmt.Println("held", len(held))
		}
	}
	os.Exit(0)
}

// shmDir is a temp dir on /dev/shm; the test is skipped where /dev/shm is not a tmpfs.
func shmDir(t *testing.T) string {
	t.Helper()
	if sp, err := Node("/proc").Statfs("/dev/shm"); err != nil || !sp.Tmpfs {
		t.Skip("/dev/shm is not a tmpfs here")
	}
	dir, err := os.MkdirTemp("/dev/shm", "podshaper-host-test-")
	if err != nil {
		t.Skip("cannot write /dev/shm:", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func writeFile(t *testing.T, path string, size int) usage.File {
	t.Helper()
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	return fileOf(t, path)
}

// fileOf is what List should say of the file at path.
func fileOf(t *testing.T, path string) usage.File {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return usage.File{
		Name:      filepath.Base(path),
		Bytes:     st.Blocks * 512,
		ChangedAt: time.Unix(st.Ctim.Unix()),
		ID:        usage.FileID{Dev: st.Dev, Ino: st.Ino},
	}
}

func TestStatfs(t *testing.T) {
	n := Node("/proc")
	shm := shmDir(t)
	before, err := n.Statfs(shm)
	if err != nil {
		t.Fatal(err)
	}
	if !before.Tmpfs || before.Size <= 0 {
		t.Fatalf("Statfs(%s) = %+v, want a tmpfs with a size", shm, before)
	}
	writeFile(t, filepath.Join(shm, "four-mib"), 4<<20)
	after, err := n.Statfs(shm)
	if err != nil {
		t.Fatal(err)
	}
	if after.Used-before.Used < 4<<20 {
		t.Errorf("Used went from %d to %d after writing 4 MiB", before.Used, after.Used)
	}

	disk := t.TempDir()
	sp, err := n.Statfs(disk)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Tmpfs {
		t.Skipf("the temp dir %s is on a tmpfs here", disk)
	}
	if sp.Size <= 0 || sp.Used <= 0 || sp.Used > sp.Size {
		t.Errorf("Statfs(%s) = %+v", disk, sp)
	}

	if _, err := n.Statfs(filepath.Join(disk, "absent")); err == nil {
		t.Error("Statfs of an absent path: no error")
	}
}

func TestList(t *testing.T) {
	many := func(count int) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			for i := range count {
				writeFile(t, filepath.Join(dir, "f"+strconv.Itoa(i)), 1)
			}
		}
	}
	withOthers := func(t *testing.T, dir string) {
		many(3)(t, dir)
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "sub", "inside"), 1)
		if err := os.Symlink("f0", filepath.Join(dir, "link-to-file")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("sub", filepath.Join(dir, "link-to-dir")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		make        func(t *testing.T, dir string)
		max         int
		wantFiles   int
		wantPartial bool
	}{
		{"1000 files, max 100", many(1000), 100, 100, true},
		{"1000 files, max 999", many(1000), 999, 999, true},
		{"1000 files, max 1000", many(1000), 1000, 1000, false},
		{"1000 files, max 5000", many(1000), 5000, 1000, false},
		{"3000 files, max 2048 (two batches)", many(3000), 2048, 2048, true},
		{"3000 files, max 3000", many(3000), 3000, 3000, false},
		{"empty, max 10", many(0), 10, 0, false},
		{"1 file, max 0", many(1), 0, 0, true},
		{"a dir and symlinks skipped", withOthers, 10, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shmDir(t)
			tc.make(t, dir)
			l, err := Node("/proc").List(dir, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Files) != tc.wantFiles || l.Partial != tc.wantPartial {
				t.Fatalf("List(max %d) = %d files, partial %v; want %d, %v",
					tc.max, len(l.Files), l.Partial, tc.wantFiles, tc.wantPartial)
			}
			seen := map[string]bool{}
			for _, f := range l.Files {
				if seen[f.Name] {
					t.Fatalf("%s listed twice", f.Name)
				}
				seen[f.Name] = true
				if want := fileOf(t, filepath.Join(dir, f.Name)); f != want {
					t.Fatalf("listed %+v, want %+v", f, want)
				}
			}
		})
	}
}

func TestListTmpfsFile(t *testing.T) {
	dir := shmDir(t)
	start := time.Now().Add(-time.Second)
	want := writeFile(t, filepath.Join(dir, "nccl-abc"), 10000)
	l, err := Node("/proc").List(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Files) != 1 || l.Files[0] != want {
		t.Fatalf("List = %+v, want [%+v]", l.Files, want)
	}
	if f := l.Files[0]; f.Bytes != 12288 || f.ChangedAt.Before(start) || f.ChangedAt.After(time.Now()) {
		t.Errorf("a 10000-byte file just written: %+v, want 12288 bytes (3 pages) changed now", f)
	}
	if _, err := Node("/proc").List(filepath.Join(dir, "absent"), 10); err == nil {
		t.Error("List of an absent dir: no error")
	}
}

// majMin is how /proc/PID/maps writes a device number.
func majMin(dev uint64) string {
	major := (dev>>8)&0xfff | (dev>>32)&0xfffff000
	minor := dev&0xff | (dev>>12)&0xffffff00
	return fmt.Sprintf("%02x:%02x", major, minor)
}

func TestMapsFile(t *testing.T) {
	for _, tc := range []struct {
		line string
		want usage.FileID
		ok   bool
	}{
		{"7f1c2a000000-7f1c2e000000 rw-s 00000000 00:1a 1234   /dev/shm/nccl-x (deleted)", usage.FileID{Dev: 0x1a, Ino: 1234}, true},
		{"55d0c0a00000-55d0c0a02000 r--p 00000000 103:02 98765 /usr/bin/sleep", usage.FileID{Dev: 0x103<<8 | 2, Ino: 98765}, true},
		{"7f0000000000-7f0000001000 rw-s 00000000 00:1234 7 /dev/shm/x", usage.FileID{Dev: 0x34 | 0x1200<<12, Ino: 7}, true},
		{"7f0000000000-7f0000001000 rw-s 00000000 1abc:05 7 /x", usage.FileID{Dev: 0xabc<<8 | 5 | 0x1000<<32, Ino: 7}, true},
		{"7ffd5c1e0000-7ffd5c201000 rw-p 00000000 00:00 0      [stack]", usage.FileID{}, false},
		{"7ffd5c1e0000-7ffd5c201000 rw-p 00000000 00:00 0", usage.FileID{}, false},
		{"garbage", usage.FileID{}, false},
		{"a-b rw-p 0 zz:00 5 /x", usage.FileID{}, false},
	} {
		id, ok := mapsFile([]byte(tc.line))
		if id != tc.want || ok != tc.ok {
			t.Errorf("mapsFile(%q) = %+v, %v; want %+v, %v", tc.line, id, ok, tc.want, tc.ok)
		}
		again := fmt.Sprintf("0-1 r--s 0 %s %d", majMin(tc.want.Dev), tc.want.Ino)
		if back, _ := mapsFile([]byte(again)); ok && back != tc.want {
			t.Errorf("mapsFile(%q) = %+v, want %+v", again, back, tc.want)
		}
	}
}

// TestHeldFakeProc reads a tree made like /proc: fds that are symlinks to real files, maps
// that name real files' dev and inode.
func TestHeldFakeProc(t *testing.T) {
	const uid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
	files := t.TempDir()
	open := writeFile(t, filepath.Join(files, "open"), 1)
	mapped := writeFile(t, filepath.Join(files, "mapped"), 1)
	systemd := writeFile(t, filepath.Join(files, "systemd"), 1)
	other := writeFile(t, filepath.Join(files, "other-pod"), 1)

	proc := t.TempDir()
	process := func(pid, cgroup string, fds []string, maps ...string) {
		dir := filepath.Join(proc, pid)
		if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o700); err != nil {
			t.Fatal(err)
		}
		if cgroup != "" {
			if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for i, target := range fds {
			if err := os.Symlink(target, filepath.Join(dir, "fd", strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "maps"), []byte(strings.Join(maps, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mapsLine := func(f usage.File) string {
		return fmt.Sprintf("7f1c2a000000-7f1c2e000000 rw-s 00000000 %s %d /dev/shm/%s", majMin(f.ID.Dev), f.ID.Ino, f.Name)
	}
	process("1", "12:pids:/kubepods/burstable/pod"+uid+"/0123abc\n0::/\n",
		[]string{filepath.Join(files, "open"), filepath.Join(files, "gone"), files},
		"55d0c0a00000-55d0c0a02000 r--p 00000000 00:00 0 [heap]", mapsLine(mapped))
	process("2", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"+
		strings.ReplaceAll(uid, "-", "_")+".slice/cri-containerd-0123.scope\n",
		[]string{filepath.Join(files, "systemd")})
	process("3", "0::/kubepods/besteffort/pod0a0a0a0a-0000-0000-0000-000000000000/ctr\n",
		[]string{filepath.Join(files, "other-pod")}, mapsLine(other))
	process("4", "", nil) // went away: no cgroup file
	if err := os.Mkdir(filepath.Join(proc, "self"), 0o700); err != nil {
		t.Fatal(err)
	}

	held, err := Node(proc).Held(uid)
	if err != nil {
		t.Fatal(err)
	}
	want := map[usage.FileID]bool{open.ID: true, mapped.ID: true, systemd.ID: true}
	if fmt.Sprint(held) != fmt.Sprint(want) {
		t.Errorf("Held = %v, want %v (open, mapped, systemd)", held, want)
	}
	if held[other.ID] {
		t.Error("a file of another pod's process is held")
	}
	if _, err := Node(proc).Held(""); err == nil {
		t.Error("Held(\"\"): no error")
	}
	if _, err := Node(filepath.Join(proc, "absent")).Held(uid); err == nil {
		t.Error("Held with an absent proc root: no error")
	}
}

// podCgroup makes a cgroup (v1 pids hierarchy) whose path names the pod; the test is
// skipped where it cannot be made.
func podCgroup(t *testing.T, name string) (procs string) {
	t.Helper()
	parent := filepath.Join("/sys/fs/cgroup/pids", fmt.Sprintf("podshaper-host-test-%d", os.Getpid()))
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Skip("cannot make a cgroup:", err)
	}
	t.Cleanup(func() {
		os.Remove(dir)
		os.Remove(parent)
	})
	return filepath.Join(dir, "cgroup.procs")
}

// start starts cmd, puts it in the cgroup whose cgroup.procs is procs, and ends it when
// the test ends.
func start(t *testing.T, cmd *exec.Cmd, procs string) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if err := os.WriteFile(procs, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Skip("cannot move a process into a cgroup:", err)
	}
}

// TestHeldProcesses reads real processes of a pod: one holds a file open, one maps a file
// it closed; a file only this test's process holds is not the pod's.
func TestHeldProcesses(t *testing.T) {
	for _, style := range []struct {
		name string
		dir  func(uid string) string
	}{
		{"cgroupfs", func(uid string) string { return "pod" + uid }},
		{"systemd", func(uid string) string {
			return "kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
		}},
	} {
		t.Run(style.name, func(t *testing.T) {
			uid := fmt.Sprintf("5e1f0a4c-0000-4000-8000-%012d", os.Getpid())
			procs := podCgroup(t, style.dir(uid))
			dir := shmDir(t)
			open := writeFile(t, filepath.Join(dir, "nccl-open"), 4096)
			mapped := writeFile(t, filepath.Join(dir, "torch_mapped"), 4096)
			free := writeFile(t, filepath.Join(dir, "nccl-free"), 4096)
			mine := writeFile(t, filepath.Join(dir, "nccl-mine"), 4096)

			f, err := os.Open(filepath.Join(dir, "nccl-open"))
			if err != nil {
				t.Fatal(err)
			}
			sleep := exec.Command("sleep", "300")
			sleep.ExtraFiles = []*os.File{f}
			start(t, sleep, procs)
			f.Close()

			mapper := exec.Command(os.Args[0])
			mapper.Env = append(os.Environ(), helperEnv+"=map "+filepath.Join(dir, "torch_mapped"))
			stdin, err := mapper.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := mapper.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			start(t, mapper, procs)
			if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
				t.Fatalf("the mapping helper said %q, %v", line, err)
			}

			held0, err := os.Open(filepath.Join(dir, "nccl-mine"))
			if err != nil {
				t.Fatal(err)
			}
			defer held0.Close()

			held, err := Node("/proc").Held(uid)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				f    usage.File
				want bool
			}{{open, true}, {mapped, true}, {free, false}, {mine, false}} {
				if held[c.f.ID] != c.want {
					t.Errorf("%s held: %v, want %v", c.f.Name, held[c.f.ID], c.want)
				}
			}
			if other, err := Node("/proc").Held("0a0a0a0a-0000-0000-0000-000000000000"); err != nil || len(other) != 0 {
				t.Errorf("Held of a pod with no processes = %v, %v; want none", other, err)
			}

			t.Run("without CAP_SYS_PTRACE", func(t *testing.T) {
				out := asNobody(t, "held /proc "+uid)
				if !strings.Contains(out, "error:") || !strings.Contains(out, "CAP_SYS_PTRACE") {
					t.Errorf("Held as nobody said %q, want an error naming CAP_SYS_PTRACE", out)
				}
				if out := asNobody(t, "held /proc 0a0a0a0a-0000-0000-0000-000000000000"); out != "held 0\n" {
					t.Errorf("Held as nobody of a pod with no processes said %q", out)
				}
			})
		})
	}
}

// asNobody runs the test binary as a helper with this command, as user nobody (no
// capabilities), and returns what it printed.
func asNobody(t *testing.T, helper string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("not root: cannot run a process as nobody")
	}
	dir, err := os.MkdirTemp("", "podshaper-host-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "host.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), helperEnv+"="+helper)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as nobody: %v: %s", err, out)
	}
	return string(out)
}

func TestRemove(t *testing.T) {
	type setup struct {
		dir   string
		files []usage.File // passed to Remove
	}
	prepare := func(t *testing.T) setup {
		dir := shmDir(t)
		a := writeFile(t, filepath.Join(dir, "nccl-a"), 100)
		c := writeFile(t, filepath.Join(dir, "torch_c"), 100)
		// replaced under its name: a new file renamed over it
		replaced := writeFile(t, filepath.Join(dir, "nccl-replaced"), 100)
		writeFile(t, filepath.Join(dir, "new"), 100)
		if err := os.Rename(filepath.Join(dir, "new"), filepath.Join(dir, "nccl-replaced")); err != nil {
			t.Fatal(err)
		}
		// now a directory
		nowDir := writeFile(t, filepath.Join(dir, "now-dir"), 100)
		if err := os.Remove(filepath.Join(dir, "now-dir")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "now-dir"), 0o700); err != nil {
			t.Fatal(err)
		}
		// gone already
		gone := writeFile(t, filepath.Join(dir, "gone"), 100)
		if err := os.Remove(filepath.Join(dir, "gone")); err != nil {
			t.Fatal(err)
		}
		return setup{dir, []usage.File{a, replaced, nowDir, gone, c}}
	}
	names := func(files []usage.File) []string {
		var n []string
		for _, f := range files {
			n = append(n, f.Name)
		}
		return n
	}
	left := func(t *testing.T, dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range entries {
			n = append(n, e.Name())
		}
		return n
	}

	t.Run("same inode only", func(t *testing.T) {
		s := prepare(t)
		removed, notReached, err := Node("/proc").Remove(s.dir, s.files, time.Now().Add(time.Minute))
		if err != nil || notReached != 0 || !slices.Equal(names(removed), []string{"nccl-a", "torch_c"}) {
			t.Errorf("Remove = %v, %d, %v; want [nccl-a torch_c], 0, nil", names(removed), notReached, err)
		}
		if got := left(t, s.dir); !slices.Equal(got, []string{"nccl-replaced", "now-dir"}) {
			t.Errorf("left %v, want [nccl-replaced now-dir]", got)
		}
	})
	t.Run("deadline past", func(t *testing.T) {
		s := prepare(t)
		removed, notReached, err := Node("/proc").Remove(s.dir, s.files, time.Now().Add(-time.Second))
		if err != nil || notReached != len(s.files) || len(removed) != 0 {
			t.Errorf("Remove = %v, %d, %v; want none, %d, nil", names(removed), notReached, err, len(s.files))
		}
		if got := left(t, s.dir); len(got) != 4 {
			t.Errorf("left %v, want all 4", got)
		}
	})
	t.Run("not a name in the volume", func(t *testing.T) {
		s := prepare(t)
		outside := writeFile(t, filepath.Join(filepath.Dir(s.dir), filepath.Base(s.dir)+"-outside"), 1)
		t.Cleanup(func() { os.Remove(filepath.Join(filepath.Dir(s.dir), outside.Name)) })
		escape := outside
		escape.Name = "../" + outside.Name
		removed, _, err := Node("/proc").Remove(s.dir, []usage.File{escape, s.files[0]}, time.Now().Add(time.Minute))
		if err == nil || !slices.Equal(names(removed), []string{"nccl-a"}) {
			t.Errorf("Remove = %v, %v; want [nccl-a] and an error", names(removed), err)
		}
		if _, err := os.Lstat(filepath.Join(filepath.Dir(s.dir), outside.Name)); err != nil {
			t.Errorf("the file outside the volume: %v", err)
		}
	})
	t.Run("absent volume", func(t *testing.T) {
		_, notReached, err := Node("/proc").Remove("/nonexistent-volume", []usage.File{{Name: "x"}}, time.Now().Add(time.Minute))
		if !errors.Is(err, os.ErrNotExist) || notReached != 1 {
			t.Errorf("Remove = %d, %v; want 1 not reached and not-exist", notReached, err)
		}
	})
}

// TestMemlock reads this process's limit through a /proc root, as podshaper-shm reads a
// container's, and against getrlimit; a pid that is not there is an error.
func TestMemlock(t *testing.T) {
	const rlimitMemlock = 8 // RLIMIT_MEMLOCK on Linux
	var want syscall.Rlimit
	if err := syscall.Getrlimit(rlimitMemlock, &want); err != nil {
		t.Fatal(err)
	}
	got, err := Node("/proc").Memlock(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Soft != want.Cur || got.Hard != want.Max {
		t.Errorf("Memlock = %+v, getrlimit %+v", got, want)
	}
	if own, err := OwnMemlock(); err != nil || own != got {
		t.Errorf("OwnMemlock = %+v, %v; want %+v", own, err, got)
	}
	proc := t.TempDir()
	if err := os.Mkdir(filepath.Join(proc, "42"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "42", "limits"), []byte("Max locked memory unlimited unlimited bytes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Node(proc).Memlock(42); err != nil || got.Soft != memlock.Unlimited || got.Hard != memlock.Unlimited {
		t.Errorf("Memlock(42) = %+v, %v; want unlimited", got, err)
	}
	if _, err := Node(proc).Memlock(43); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Memlock of a pid not there: %v", err)
	}
}
