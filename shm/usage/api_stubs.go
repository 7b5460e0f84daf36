package usage

import "time"

// ---- The helper replaces these stubs with their implementations (usage.go, texts.go,
// leftovers.go, budget.go, volume.go) and deletes this file. Signatures are the contract.

// KindOf tells a file's kind by its name.
func KindOf(name string) Kind { return KindOther }

// String: "NCCL", "torch", "OpenMP", "PSM/MPI", "other".
func (k Kind) String() string { return "" }

// TallyOf counts files by kind; partial says the listing was cut short.
func TallyOf(files []File, partial bool) Tally { return Tally{} }

// Total files and bytes of a tally.
func (t Tally) Total() (files int, bytes int64) { return 0, 0 }

// Words: "NCCL segments: 3 files, 96Mi; DataLoader (torch_*): 2 files, 40Mi; other: 1 file, 1Mi"
// (kinds with no file left out; "at least" before the counts when Partial; "nothing" when empty).
func (t Tally) Words() string { return "" }

// Leftovers: the files of a volume that a dead run left: held by no live process of the
// pod (not in held) and last changed before cutoff (the end of the dead run: what the new
// run or a live container made after it is never touched).
func Leftovers(files []File, held map[FileID]bool, cutoff time.Time) []File { return nil }

// Volume is one shaped pod's /dev/shm: its runs, the current use, and what is still to tell.
type Volume struct {
	Size int64 // statfs: f_blocks × f_bsize
	Used int64 // (f_blocks − f_bfree) × f_bsize, the last sample
	Runs []Run // the last RunsKept runs, newest last; the last one is open while EndedAt is zero
}

// Current: the open run, or nil.
func (v *Volume) Current() *Run { return nil }

// Start begins the next run at `at` (number = last number + 1). A run still open is ended
// first, as "Restarted", and returned so that its end is told; nil when none was open.
func (v *Volume) Start(at time.Time) (ended *Run) { return nil }

// Observe records one sample (size and use at `at`): the open run's peak and size. It
// returns true once per run: the sample in which use first reaches NearlyFullFraction of
// the size (the caller tells ShmNearlyFull and then calls MarkNearlyFull). No open run:
// only Size and Used change.
func (v *Volume) Observe(at time.Time, size, used int64) (crossed bool) { return false }

// MarkNearlyFull: ShmNearlyFull was told for the open run.
func (v *Volume) MarkNearlyFull() {}

// End ends the open run at `at` with how it ended; returns it, or nil when none was open.
func (v *Volume) End(at time.Time, how string) *Run { return nil }

// Suggest: peak × (1 + Headroom), rounded up to a whole Mi (never below 1Mi).
func Suggest(peak int64) int64 { return 0 }

// Quantity: bytes as Kubernetes writes a quantity, rounded up to the unit shown: "412Mi",
// "1Gi" only when exact, "1536Mi", "12Ki", "0".
func Quantity(bytes int64) string { return "" }

// Advice names what to raise when /dev/shm is nearly full, from what fills it: NCCL
// segments → podshaper.io/nccl-communicators; DataLoader (torch) → podshaper.io/batch-bytes
// (or batch-shape), podshaper.io/dataloader-workers, podshaper.io/prefetch-factor; other or
// nothing known → podshaper.io/shm-size. userVolume: the pod mounts its own emptyDir at
// /dev/shm, whose sizeLimit is the user's to raise (podshaper's annotations do not size it).
func Advice(t Tally, userVolume bool) string { return "" }

// NearlyFullMessage: the ShmNearlyFull Event's text. E.g.
// "/dev/shm is 92% full in run 2: 905Mi of 983Mi used. It holds NCCL segments: 3 files,
// 96Mi; DataLoader (torch_*): 40 files, 800Mi. <Advice>"
func NearlyFullMessage(r Run, used int64, t Tally, userVolume bool) string { return "" }

// UsageMessage: the ShmUsage Event's text when a run ends. E.g.
// "peak 412Mi of 983Mi (42%) in run 1 (Completed): /dev/shm could be 495Mi (peak + 20% headroom)"
// where the peak is above 1/(1+Headroom) of the size: "... /dev/shm was too small or just
// enough: <Advice-like sentence>". With the tally of what was there at the end when given.
func UsageMessage(r Run, atEnd *Tally) string { return "" }

// LeftoversMessage: the ShmLeftoversRemoved Event's text, e.g. "removed 4 files (104Mi) a
// dead run left in /dev/shm before run 2 started: NCCL segments: 3 files, 96Mi; DataLoader
// (torch_*): 1 file, 8Mi." plus ", kept 1 file a running container holds" when kept > 0,
// plus " (stopped after 1s: N files left)" when notRemoved > 0.
func LeftoversMessage(run int, removed Tally, kept int, notRemoved int) string { return "" }

// Budget bounds API writes per node: at most one per Every (30 s) unless urgent (a
// threshold crossed, a run begun or ended); nothing when nothing changed is the caller's.
type Budget struct {
	Every time.Duration
	last  time.Time
}

// Allow says whether a write may go now, and if so takes it.
func (b *Budget) Allow(now time.Time, urgent bool) bool { return true }
