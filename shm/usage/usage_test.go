package usage

import (
	"testing"
	"time"
)

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		name string
		want Kind
	}{
		{"nccl-ZjM3aF", KindNCCL},
		{"nccl", KindOther},
		{"xnccl-1", KindOther},
		{"NCCL-1", KindOther},
		{"torch_1234_567_0", KindTorch},
		{"torch", KindOther},
		{"__KMP_REGISTERED_LIB_4242", KindOpenMP},
		{"__KMP_REGISTERED_LIB", KindOther},
		{"psm_shm.5d1c0e7a-0000", KindPSM},
		{"psm2_shm.1234", KindPSM},
		{"vader_segment.node-1.9a1c0001.3", KindPSM},
		{"sm_segment.node-1.1000.3", KindPSM},
		{"psm3_shm.1", KindOther},
		{"sem.mp-abc", KindOther},
		{"", KindOther},
	} {
		if got := KindOf(c.name); got != c.want {
			t.Errorf("KindOf(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestKindString(t *testing.T) {
	want := []string{"NCCL", "torch", "OpenMP", "PSM/MPI", "other", "Kind(5)", "Kind(-1)"}
	for i, k := range []Kind{KindNCCL, KindTorch, KindOpenMP, KindPSM, KindOther, NumKinds, -1} {
		if got := k.String(); got != want[i] {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want[i])
		}
	}
}

func TestTallyOf(t *testing.T) {
	files := []File{
		{Name: "nccl-a", Bytes: 32 << 20},
		{Name: "nccl-b", Bytes: 32 << 20},
		{Name: "torch_1_2", Bytes: 8 << 20},
		{Name: "__KMP_REGISTERED_LIB_7", Bytes: 4096},
		{Name: "vader_segment.x", Bytes: 1 << 20},
		{Name: "notes.txt", Bytes: 512},
		{Name: "sem.x", Bytes: 0},
	}
	got := TallyOf(files, true)
	want := Tally{
		Files:   [NumKinds]int{2, 1, 1, 1, 2},
		Bytes:   [NumKinds]int64{64 << 20, 8 << 20, 4096, 1 << 20, 512},
		Partial: true,
	}
	if got != want {
		t.Errorf("TallyOf = %+v, want %+v", got, want)
	}
	n, b := got.Total()
	if n != 7 || b != 73<<20+4096+512 {
		t.Errorf("Total = %d, %d", n, b)
	}
	if n, b := TallyOf(nil, false).Total(); n != 0 || b != 0 {
		t.Errorf("empty Total = %d, %d", n, b)
	}
}

func TestTallyWords(t *testing.T) {
	for _, c := range []struct {
		name string
		t    Tally
		want string
	}{
		{"empty", Tally{}, "nothing"},
		{"partial empty", Tally{Partial: true}, "nothing counted (the listing stopped early)"},
		{"one kind, one file", Tally{Files: [NumKinds]int{KindOther: 1}, Bytes: [NumKinds]int64{KindOther: 1}},
			"other: 1 file, 1Ki"},
		{"three kinds", Tally{
			Files: [NumKinds]int{KindNCCL: 3, KindTorch: 2, KindOther: 1},
			Bytes: [NumKinds]int64{KindNCCL: 96 << 20, KindTorch: 40 << 20, KindOther: 1 << 20},
		}, "NCCL segments: 3 files, 96Mi; DataLoader (torch_*): 2 files, 40Mi; other: 1 file, 1Mi"},
		{"all kinds", Tally{
			Files: [NumKinds]int{1, 2, 3, 4, 5},
			Bytes: [NumKinds]int64{32 << 20, 1536 << 20, 3 * 4096, 16 << 30, 0},
		}, "NCCL segments: 1 file, 32Mi; DataLoader (torch_*): 2 files, 1536Mi; " +
			"OpenMP (__KMP_REGISTERED_LIB_*): 3 files, 12Ki; PSM/MPI segments: 4 files, 16Gi; other: 5 files, 0"},
		{"partial", Tally{
			Files:   [NumKinds]int{KindNCCL: 1000, KindTorch: 1},
			Bytes:   [NumKinds]int64{KindNCCL: 1000 << 20, KindTorch: 8<<20 + 1},
			Partial: true,
		}, "NCCL segments: at least 1000 files, 1000Mi; DataLoader (torch_*): at least 1 file, 9Mi"},
	} {
		if got := c.t.Words(); got != c.want {
			t.Errorf("%s: Words() = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestLeftovers(t *testing.T) {
	cutoff := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	before, after := cutoff.Add(-time.Second), cutoff.Add(time.Nanosecond)
	files := []File{
		{Name: "nccl-dead", ChangedAt: before, ID: FileID{1, 10}},
		{Name: "nccl-held", ChangedAt: before, ID: FileID{1, 11}},
		{Name: "torch_at_cutoff", ChangedAt: cutoff, ID: FileID{1, 12}},
		{Name: "torch_new", ChangedAt: after, ID: FileID{1, 13}},
		{Name: "other-dead", ChangedAt: before, ID: FileID{1, 14}},
		{Name: "same-ino-other-dev", ChangedAt: before, ID: FileID{2, 11}},
	}
	held := map[FileID]bool{{1, 11}: true, {1, 13}: true}
	got := Leftovers(files, held, cutoff)
	want := []string{"nccl-dead", "other-dead", "same-ino-other-dev"}
	if len(got) != len(want) {
		t.Fatalf("Leftovers = %v, want names %v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i] {
			t.Errorf("Leftovers[%d] = %q, want %q", i, got[i].Name, want[i])
		}
	}
	if got := Leftovers(files, nil, before); got != nil {
		t.Errorf("nothing before the earliest change: got %v", got)
	}
	if got := Leftovers(files[:1], nil, cutoff); len(got) != 1 {
		t.Errorf("nil held: got %v", got)
	}
}

func TestBudget(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	b := Budget{Every: 30 * time.Second}
	for i, c := range []struct {
		at     time.Duration
		urgent bool
		want   bool
	}{
		{0, false, true},                 // the first write
		{time.Second, false, false},      // within Every
		{29 * time.Second, false, false}, // still within
		{30 * time.Second, false, true},  // exactly Every later
		{31 * time.Second, true, true},   // urgent: always, and counts as the last
		{60 * time.Second, false, false}, // 29 s after the urgent one
		{61 * time.Second, false, true},
		{61 * time.Second, true, true}, // urgent at the same instant
		{62 * time.Second, true, true},
	} {
		if got := b.Allow(t0.Add(c.at), c.urgent); got != c.want {
			t.Errorf("step %d: Allow(+%v, urgent=%v) = %v, want %v", i, c.at, c.urgent, got, c.want)
		}
	}
	first := Budget{Every: 30 * time.Second}
	if !first.Allow(t0, true) || first.Allow(t0.Add(time.Second), false) {
		t.Error("an urgent first write must count as the last")
	}
}
