package usage

import (
	"testing"
	"time"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestVolumeNoOpenRun(t *testing.T) {
	var v Volume
	if v.Current() != nil {
		t.Fatal("a new volume has no open run")
	}
	if v.Observe(at(1), 1000, 950) {
		t.Error("no open run: nothing crosses")
	}
	if v.Size != 1000 || v.Used != 950 || len(v.Runs) != 0 {
		t.Errorf("no open run: only Size and Used change, got %+v", v)
	}
	v.MarkNearlyFull()
	if r := v.End(at(2), "Completed"); r != nil {
		t.Errorf("End with no open run = %+v, want nil", r)
	}
	if len(v.Runs) != 0 {
		t.Errorf("runs = %+v", v.Runs)
	}
}

func TestVolumeRun(t *testing.T) {
	v := Volume{Size: 1000}
	if ended := v.Start(at(0)); ended != nil {
		t.Fatalf("first Start ended %+v", ended)
	}
	r := v.Current()
	if r == nil || *r != (Run{Number: 1, StartedAt: at(0), Size: 1000}) {
		t.Fatalf("Current = %+v", r)
	}
	samples := []struct {
		size, used int64
		crossed    bool
	}{
		{1000, 100, false},
		{1000, 400, false},
		{1000, 300, false}, // below the peak: the peak stays
		{1000, 899, false}, // just below 90%
		{1000, 900, true},  // 90%: crossed
		{1000, 950, true},  // not marked yet: still told
	}
	for i, s := range samples {
		if got := v.Observe(at(i+1), s.size, s.used); got != s.crossed {
			t.Errorf("sample %d (%d of %d): crossed = %v, want %v", i, s.used, s.size, got, s.crossed)
		}
	}
	v.MarkNearlyFull()
	if v.Observe(at(7), 1000, 990) || v.Observe(at(8), 1000, 1000) {
		t.Error("crossed again in a run already NearlyFull")
	}
	if v.Observe(at(9), 2000, 400) {
		t.Error("20% of a grown size crossed")
	}
	if v.Size != 2000 || v.Used != 400 {
		t.Errorf("volume Size, Used = %d, %d", v.Size, v.Used)
	}
	if got := *v.Current(); got.Size != 2000 || got.Peak != 1000 || !got.PeakAt.Equal(at(8)) || !got.NearlyFull {
		t.Errorf("run = %+v", got)
	}
	v.Observe(at(10), 2000, 1000) // equal to the peak: PeakAt stays the first
	if !v.Current().PeakAt.Equal(at(8)) {
		t.Errorf("PeakAt = %v, want the first sample at the peak", v.Current().PeakAt)
	}

	ended := v.End(at(11), "Error (exit 1)")
	want := Run{Number: 1, StartedAt: at(0), EndedAt: at(11), Size: 2000, Peak: 1000, PeakAt: at(8),
		NearlyFull: true, Ended: "Error (exit 1)"}
	if ended == nil || *ended != want {
		t.Fatalf("End = %+v, want %+v", ended, want)
	}
	if v.Current() != nil || v.Runs[0] != want {
		t.Errorf("after End: Current %+v, runs %+v", v.Current(), v.Runs)
	}
	ended.Peak = 1 // a copy: the volume's run does not change
	if v.Runs[0].Peak != 1000 {
		t.Error("End returned the volume's own run, not a copy")
	}
	if v.End(at(12), "Completed") != nil {
		t.Error("End twice")
	}
	if v.Observe(at(12), 2000, 1900) || v.Runs[0].Peak != 1000 {
		t.Error("a sample after the end changed the ended run")
	}

	// The next run: numbered on, sized from the last sample, crossing again once.
	if ended := v.Start(at(20)); ended != nil {
		t.Errorf("Start after End ended %+v", ended)
	}
	if r := *v.Current(); r != (Run{Number: 2, StartedAt: at(20), Size: 2000}) {
		t.Errorf("run 2 = %+v", r)
	}
	if !v.Observe(at(21), 2000, 1800) {
		t.Error("run 2 did not cross at 90%")
	}
}

func TestVolumeRestart(t *testing.T) {
	var v Volume
	v.Start(at(0))
	v.Observe(at(1), 1000, 500)
	ended := v.Start(at(5))
	want := Run{Number: 1, StartedAt: at(0), EndedAt: at(5), Size: 1000, Peak: 500, PeakAt: at(1), Ended: "Restarted"}
	if ended == nil || *ended != want {
		t.Fatalf("Start over an open run ended %+v, want %+v", ended, want)
	}
	if len(v.Runs) != 2 || v.Runs[0] != want || *v.Current() != (Run{Number: 2, StartedAt: at(5), Size: 1000}) {
		t.Errorf("runs = %+v", v.Runs)
	}
}

func TestVolumeRunsKept(t *testing.T) {
	var v Volume
	const n = RunsKept + 3
	for i := range n {
		v.Start(at(10 * i))
		v.Observe(at(10*i+1), 1000, int64(i+1))
		v.End(at(10*i+2), "Completed")
	}
	if len(v.Runs) != RunsKept {
		t.Fatalf("kept %d runs, want %d", len(v.Runs), RunsKept)
	}
	for i, r := range v.Runs {
		number := n - RunsKept + 1 + i
		if r.Number != number || r.Peak != int64(number) || !r.StartedAt.Equal(at(10*(number-1))) {
			t.Errorf("runs[%d] = %+v, want run %d", i, r, number)
		}
	}
	v.Start(at(1000))
	if r := v.Current(); r == nil || r.Number != n+1 || len(v.Runs) != RunsKept {
		t.Errorf("after one more start: current %+v, %d runs", r, len(v.Runs))
	}
}

func TestVolumeRestoredRuns(t *testing.T) {
	// Runs read back from the API: an open run keeps its peak and its NearlyFull.
	v := Volume{Runs: []Run{
		{Number: 7, StartedAt: at(0), EndedAt: at(1), Ended: "Completed"},
		{Number: 8, StartedAt: at(2), Size: 1000, Peak: 950, PeakAt: at(3), NearlyFull: true},
	}}
	if v.Observe(at(4), 1000, 920) {
		t.Error("a restored NearlyFull run crossed again")
	}
	if r := v.Current(); r.Peak != 950 || !r.PeakAt.Equal(at(3)) {
		t.Errorf("restored peak lost: %+v", r)
	}
	v.Start(at(5))
	if v.Current().Number != 9 {
		t.Errorf("numbering after restore: %+v", v.Current())
	}
}

func TestVolumeZeroSize(t *testing.T) {
	var v Volume
	v.Start(at(0))
	if v.Observe(at(1), 0, 0) {
		t.Error("a size of 0 crossed")
	}
}
