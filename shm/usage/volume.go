package usage

import "time"

// Volume is one shaped pod's /dev/shm: its runs, the current use, and what is still to tell.
type Volume struct {
	Size int64 // statfs: f_blocks × f_bsize
	Used int64 // (f_blocks − f_bfree) × f_bsize, the last sample
	Runs []Run // the last RunsKept runs, newest last; the last one is open while EndedAt is zero
}

// Current: the open run, or nil.
func (v *Volume) Current() *Run {
	if n := len(v.Runs); n > 0 && v.Runs[n-1].EndedAt.IsZero() {
		return &v.Runs[n-1]
	}
	return nil
}

// Start begins the next run at `at` (number = last number + 1, or 1; its Size the volume's
// last Size, its Peak 0 until a sample). A run still open is ended first, as "Restarted",
// and returned (a copy) so that its end is told; nil when none was open. The oldest runs go
// beyond RunsKept; the numbers keep counting.
func (v *Volume) Start(at time.Time) (ended *Run) {
	ended = v.End(at, "Restarted")
	number := 1
	if n := len(v.Runs); n > 0 {
		number = v.Runs[n-1].Number + 1
	}
	v.Runs = append(v.Runs, Run{Number: number, StartedAt: at, Size: v.Size})
	if over := len(v.Runs) - RunsKept; over > 0 {
		v.Runs = append(v.Runs[:0], v.Runs[over:]...)
	}
	return ended
}

// Observe records one sample (size and use at `at`): the volume's Size and Used, and the
// open run's Size and Peak (with PeakAt, the first sample at that peak). It returns true
// when the open run's use is at or above NearlyFullFraction of a size above 0 and the run
// is not yet NearlyFull: the caller tells ShmNearlyFull and then calls MarkNearlyFull, so
// it is told once per run (a warning that could not be told is tried at the next sample).
// No open run: only Size and Used change, and it returns false.
func (v *Volume) Observe(at time.Time, size, used int64) (crossed bool) {
	v.Size, v.Used = size, used
	r := v.Current()
	if r == nil {
		return false
	}
	r.Size = size
	if used > r.Peak {
		r.Peak, r.PeakAt = used, at
	}
	return size > 0 && !r.NearlyFull && percent(used, size) >= nearlyFullPercent
}

// MarkNearlyFull: ShmNearlyFull was told for the open run (none open: nothing).
func (v *Volume) MarkNearlyFull() {
	if r := v.Current(); r != nil {
		r.NearlyFull = true
	}
}

// End ends the open run at `at` with how it ended; returns it (a copy), or nil when none
// was open.
func (v *Volume) End(at time.Time, how string) *Run {
	r := v.Current()
	if r == nil {
		return nil
	}
	r.EndedAt, r.Ended = at, how
	ended := *r
	return &ended
}
