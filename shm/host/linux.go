package host

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"podshaper.io/shm/memlock"
	"podshaper.io/shm/usage"
)

// tmpfsMagic is statfs's f_type of a tmpfs (TMPFS_MAGIC).
const tmpfsMagic = 0x01021994

// listBatch is how many directory entries List asks for at a time.
const listBatch = 1024

// Node returns the real Host: procRoot is the host's /proc as this process sees it (the
// pod runs with hostPID: "/proc").
func Node(procRoot string) Host { return node{procRoot: procRoot} }

type node struct{ procRoot string }

func (node) Statfs(path string) (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return Space{}, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	bsize := int64(st.Bsize)
	return Space{
		Size:  int64(st.Blocks) * bsize,
		Used:  int64(st.Blocks-st.Bfree) * bsize,
		Tmpfs: st.Type == tmpfsMagic,
	}, nil
}

func (node) List(path string, max int) (Listing, error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return Listing{}, err
	}
	defer root.Close()
	dir, err := root.Open(".")
	if err != nil {
		return Listing{}, err
	}
	defer dir.Close()
	var l Listing
	for read := 0; read < max; {
		entries, err := dir.ReadDir(min(listBatch, max-read))
		read += len(entries)
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			f, ok, err := lstatFile(root, e.Name())
			if err != nil {
				return Listing{}, err
			}
			if ok {
				l.Files = append(l.Files, f)
			}
		}
		if err == io.EOF {
			return l, nil
		}
		if err != nil {
			return Listing{}, err
		}
	}
	more, err := dir.ReadDir(1)
	if err != nil && err != io.EOF {
		return Listing{}, err
	}
	l.Partial = len(more) > 0
	return l, nil
}

// lstatFile reads one name of the directory without following it: ok is false when the
// name is gone or is no longer a regular file.
func lstatFile(root *os.Root, name string) (f usage.File, ok bool, err error) {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return usage.File{}, false, nil
	}
	if err != nil {
		return usage.File{}, false, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return usage.File{}, false, nil
	}
	return usage.File{
		Name:      name,
		Bytes:     st.Blocks * 512,
		ChangedAt: time.Unix(st.Ctim.Unix()),
		ID:        usage.FileID{Dev: st.Dev, Ino: st.Ino},
	}, true, nil
}

func (n node) Held(podUID string) (map[usage.FileID]bool, error) {
	if podUID == "" {
		return nil, errors.New("held: no pod UID")
	}
	marks := [][]byte{[]byte("pod" + podUID), []byte("pod" + strings.ReplaceAll(podUID, "-", "_"))}
	d, err := os.Open(n.procRoot)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	held := map[usage.FileID]bool{}
	for _, pid := range names {
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		dir := filepath.Join(n.procRoot, pid)
		cgroup, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if gone(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(cgroup, marks[0]) && !bytes.Contains(cgroup, marks[1]) {
			continue
		}
		err = readFds(dir, held)
		if err == nil {
			err = readMaps(dir, held)
		}
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("process %s of pod %s: %w (%v)", pid, podUID, ErrNoPtrace, err)
		}
		if err != nil && !gone(err) {
			return nil, err
		}
	}
	return held, nil
}

// gone: the process or fd went away while read.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// readFds adds the regular files the process at dir holds open.
func readFds(dir string, held map[usage.FileID]bool) error {
	d, err := os.Open(filepath.Join(dir, "fd"))
	if err != nil {
		return err
	}
	fds, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, fd := range fds {
		var st syscall.Stat_t
		err := syscall.Stat(filepath.Join(dir, "fd", fd), &st)
		if gone(err) {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "stat", Path: filepath.Join(dir, "fd", fd), Err: err}
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			held[usage.FileID{Dev: st.Dev, Ino: st.Ino}] = true
		}
	}
	return nil
}

// readMaps adds the files the process at dir maps.
func readMaps(dir string, held map[usage.FileID]bool) error {
	f, err := os.Open(filepath.Join(dir, "maps"))
	if err != nil {
		return err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.Scan() {
		if id, ok := mapsFile(s.Bytes()); ok {
			held[id] = true
		}
	}
	return s.Err()
}

// mapsFile reads the device and inode of one /proc/PID/maps line
// ("start-end perms offset maj:min inode [path]"); ok is false for an anonymous mapping.
func mapsFile(line []byte) (id usage.FileID, ok bool) {
	fields := bytes.Fields(line)
	if len(fields) < 5 {
		return usage.FileID{}, false
	}
	majMin, inode := fields[3], fields[4]
	i := bytes.IndexByte(majMin, ':')
	if i < 0 {
		return usage.FileID{}, false
	}
	major, err1 := strconv.ParseUint(string(majMin[:i]), 16, 32)
	minor, err2 := strconv.ParseUint(string(majMin[i+1:]), 16, 32)
	ino, err3 := strconv.ParseUint(string(inode), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || ino == 0 {
		return usage.FileID{}, false
	}
	return usage.FileID{Dev: mkdev(major, minor), Ino: ino}, true
}

// mkdev encodes a device number as stat's st_dev does (glibc's makedev).
func mkdev(major, minor uint64) uint64 {
	return minor&0xff | (major&0xfff)<<8 | (minor&^0xff)<<12 | (major&^0xfff)<<32
}

func (node) Remove(path string, files []usage.File, deadline time.Time) (removed []usage.File, notReached int, err error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, len(files), err
	}
	defer root.Close()
	dir, err := root.Open(".")
	if err != nil {
		return nil, len(files), err
	}
	defer dir.Close()
	dirfd := int(dir.Fd())
	var errs []error
	for i, f := range files {
		if time.Now().After(deadline) {
			return removed, len(files) - i, errors.Join(errs...)
		}
		if f.Name == "" || f.Name == "." || f.Name == ".." || strings.ContainsRune(f.Name, '/') {
			errs = append(errs, fmt.Errorf("remove %q: not a name in %s", f.Name, path))
			continue
		}
		now, ok, err := lstatFile(root, f.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok || now.ID != f.ID {
			continue
		}
		err = syscall.Unlinkat(dirfd, f.Name)
		if errors.Is(err, syscall.ENOENT) {
			continue
		}
		if err != nil {
			errs = append(errs, &fs.PathError{Op: "unlinkat", Path: filepath.Join(path, f.Name), Err: err})
			continue
		}
		removed = append(removed, f)
	}
	return removed, 0, errors.Join(errs...)
}

func (n node) Memlock(pid uint32) (memlock.Limit, error) {
	return readMemlock(filepath.Join(n.procRoot, strconv.FormatUint(uint64(pid), 10), "limits"))
}

// OwnMemlock: this process's RLIMIT_MEMLOCK. podshaper-shm's container carries no ulimit
// annotation, so it is what the runtime gives a container that nothing sets one for.
func OwnMemlock() (memlock.Limit, error) { return readMemlock("/proc/self/limits") }

func readMemlock(path string) (memlock.Limit, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return memlock.Limit{}, err
	}
	l, err := memlock.ParseProcLimits(string(b))
	if err != nil {
		return memlock.Limit{}, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}
