package usage

import (
	"math"
	"strings"
	"testing"
)

const gi int64 = 1 << 30

func TestQuantity(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		want  string
	}{
		{-1, "0"},
		{0, "0"},
		{1, "1Ki"},
		{ki, "1Ki"},
		{ki + 1, "2Ki"},
		{12 * ki, "12Ki"},
		{1023 * ki, "1023Ki"},
		{1023*ki + 1, "1Mi"}, // 1024Ki rounded up is 1Mi
		{mi, "1Mi"},
		{mi + 1, "2Mi"},
		{412 * mi, "412Mi"},
		{983 * mi, "983Mi"},
		{gi, "1024Mi"},
		{1536 * mi, "1536Mi"},
		{10*gi - mi, "10239Mi"},
		{10*gi - 1, "10Gi"}, // rounded up to the unit shown
		{10 * gi, "10Gi"},
		{10*gi + 1, "10241Mi"},
		{10*gi + mi, "10241Mi"},
		{16 * gi, "16Gi"},
		{1 << 40, "1024Gi"},
		{math.MaxInt64, "8589934592Gi"},
	} {
		if got := Quantity(c.bytes); got != c.want {
			t.Errorf("Quantity(%d) = %q, want %q", c.bytes, got, c.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	for _, c := range []struct {
		peak, want int64
	}{
		{-5, mi},
		{0, mi},
		{1, mi},
		{mi * 5 / 6, mi},     // × 1.2 is exactly 1Mi
		{mi*5/6 + 1, 2 * mi}, // a byte more
		{5 * mi, 6 * mi},     // exact, not 7Mi from a float's error
		{412 * mi, 495 * mi}, // 494.4Mi
		{950 * mi, 1140 * mi},
		{10 * gi, 12 * gi},
		{5 << 60, 6 << 60}, // 5Ei: no overflow in × 1.2
		{math.MaxInt64, math.MaxInt64 &^ (mi - 1)}, // saturates at the largest whole Mi
	} {
		if got := Suggest(c.peak); got != c.want {
			t.Errorf("Suggest(%d) = %d, want %d", c.peak, got, c.want)
		}
	}
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		part, whole, want int64
	}{
		{0, 100, 0},
		{5, 0, 0},
		{-1, 100, 0},
		{899, 1000, 89},
		{900, 1000, 90},
		{412 * mi, 983 * mi, 41}, // 41.9: rounded down
		{2000, 1000, 200},
		{math.MaxInt64, math.MaxInt64, 100},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 / 50, 1, math.MaxInt64},
	} {
		if got := percent(c.part, c.whole); got != c.want {
			t.Errorf("percent(%d, %d) = %d, want %d", c.part, c.whole, got, c.want)
		}
	}
}

func tally(files [NumKinds]int, bytes [NumKinds]int64) Tally {
	return Tally{Files: files, Bytes: bytes}
}

func TestAdvice(t *testing.T) {
	const (
		nccl  = "Raise podshaper.io/nccl-communicators if the job makes more communicators than it says."
		torch = "Raise podshaper.io/batch-bytes (or batch-shape), podshaper.io/dataloader-workers or " +
			"podshaper.io/prefetch-factor to what the DataLoader really holds."
		size = "Neither NCCL nor the DataLoader fills it: raise podshaper.io/batch-bytes to make room, or mount the pod's own emptyDir at /dev/shm with the sizeLimit it needs (podshaper keeps it as written)."
		user = "This pod mounts its own emptyDir at /dev/shm: raise its sizeLimit (and the memory limit that pays for it)."
	)
	for _, c := range []struct {
		name string
		t    Tally
		user bool
		want string
	}{
		{"nothing known", Tally{}, false, size},
		{"NCCL", tally([NumKinds]int{KindNCCL: 3}, [NumKinds]int64{KindNCCL: 96 * mi}), false, nccl},
		{"torch", tally([NumKinds]int{KindTorch: 40}, [NumKinds]int64{KindTorch: 800 * mi}), false, torch},
		{"torch holds the most", tally([NumKinds]int{3, 40, 1, 0, 0}, [NumKinds]int64{96 * mi, 800 * mi, 4096}), false, torch},
		{"NCCL holds the most", tally([NumKinds]int{3, 1, 0, 0, 0}, [NumKinds]int64{96 * mi, 8 * mi}), false, nccl},
		{"a tie goes to NCCL", tally([NumKinds]int{1, 1, 0, 0, 0}, [NumKinds]int64{mi, mi}), false, nccl},
		{"other holds the most", tally([NumKinds]int{1, 1, 0, 0, 1}, [NumKinds]int64{mi, mi, 0, 0, 2 * mi}), false, size},
		{"PSM", tally([NumKinds]int{KindPSM: 4}, [NumKinds]int64{KindPSM: 64 * mi}), false, size},
		{"empty files only", tally([NumKinds]int{KindNCCL: 2}, [NumKinds]int64{}), false, size},
		{"the user's volume", tally([NumKinds]int{KindNCCL: 3}, [NumKinds]int64{KindNCCL: 96 * mi}), true, user},
	} {
		if got := Advice(c.t, c.user); got != c.want {
			t.Errorf("%s: Advice = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestNearlyFullMessage(t *testing.T) {
	r := Run{Number: 2, Size: 983 * mi}
	full := tally([NumKinds]int{KindNCCL: 3, KindTorch: 40}, [NumKinds]int64{KindNCCL: 96 * mi, KindTorch: 800 * mi})
	for _, c := range []struct {
		name string
		used int64
		t    Tally
		user bool
		want string
	}{
		{"podshaper's volume", 905 * mi, full, false,
			"/dev/shm is 92% full in run 2: 905Mi of 983Mi used. It holds NCCL segments: 3 files, 96Mi; " +
				"DataLoader (torch_*): 40 files, 800Mi. Raise podshaper.io/batch-bytes (or batch-shape), " +
				"podshaper.io/dataloader-workers or podshaper.io/prefetch-factor to what the DataLoader really holds."},
		{"the user's volume, partial", 983 * mi, Tally{Files: full.Files, Bytes: full.Bytes, Partial: true}, true,
			"/dev/shm is 100% full in run 2: 983Mi of 983Mi used. It holds NCCL segments: at least 3 files, 96Mi; " +
				"DataLoader (torch_*): at least 40 files, 800Mi. This pod mounts its own emptyDir at /dev/shm: " +
				"raise its sizeLimit (and the memory limit that pays for it)."},
		{"nothing listed", 900 * mi, Tally{}, false,
			"/dev/shm is 91% full in run 2: 900Mi of 983Mi used. It holds nothing. " +
				"Neither NCCL nor the DataLoader fills it: raise podshaper.io/batch-bytes to make room, or mount the pod's own emptyDir at /dev/shm with the sizeLimit it needs (podshaper keeps it as written)."},
	} {
		if got := NearlyFullMessage(r, c.used, c.t, c.user); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestUsageMessage(t *testing.T) {
	nccl := tally([NumKinds]int{KindNCCL: 3}, [NumKinds]int64{KindNCCL: 96 * mi})
	for _, c := range []struct {
		name  string
		r     Run
		atEnd *Tally
		user  bool
		want  string
	}{
		{"room to spare", Run{Number: 1, Size: 983 * mi, Peak: 412 * mi, Ended: "Completed"}, nil, false,
			"peak 412Mi of 983Mi (41%) in run 1 (Completed): /dev/shm could be 495Mi (peak + 20% headroom)."},
		{"room to spare, with what was left", Run{Number: 3, Size: 16 * gi, Peak: 2 * gi, Ended: "Error (exit 1)"}, &nccl, false,
			"peak 2048Mi of 16Gi (12%) in run 3 (Error (exit 1)): /dev/shm could be 2458Mi (peak + 20% headroom). " +
				"At the end it held NCCL segments: 3 files, 96Mi."},
		{"room to spare, empty at the end", Run{Number: 1, Size: 983 * mi, Peak: 412 * mi, Ended: "Completed"}, &Tally{}, false,
			"peak 412Mi of 983Mi (41%) in run 1 (Completed): /dev/shm could be 495Mi (peak + 20% headroom)."},
		{"just enough, no tally", Run{Number: 1, Size: 983 * mi, Peak: 950 * mi, Ended: "Completed"}, nil, false,
			"peak 950Mi of 983Mi (96%) in run 1 (Completed): /dev/shm was just enough or too small for this run. " +
				"Neither NCCL nor the DataLoader fills it: raise podshaper.io/batch-bytes to make room, or mount the pod's own emptyDir at /dev/shm with the sizeLimit it needs (podshaper keeps it as written)."},
		{"too small, NCCL at the end", Run{Number: 4, Size: 983 * mi, Peak: 983 * mi, Ended: "Error (exit 1)"}, &nccl, false,
			"peak 983Mi of 983Mi (100%) in run 4 (Error (exit 1)): /dev/shm was just enough or too small for this run. " +
				"Raise podshaper.io/nccl-communicators if the job makes more communicators than it says. " +
				"At the end it held NCCL segments: 3 files, 96Mi."},
		{"too small, the user's volume", Run{Number: 1, Size: mi, Peak: mi, Ended: "Completed"}, &nccl, true,
			"peak 1Mi of 1Mi (100%) in run 1 (Completed): /dev/shm was just enough or too small for this run. " +
				"This pod mounts its own emptyDir at /dev/shm: raise its sizeLimit (and the memory limit that pays for it). " +
				"At the end it held NCCL segments: 3 files, 96Mi."},
		{"peak 1/1.2 of the size: just enough", Run{Number: 1, Size: 6 * mi, Peak: 5 * mi, Ended: "Completed"}, nil, false,
			"peak 5Mi of 6Mi (83%) in run 1 (Completed): /dev/shm was just enough or too small for this run. " +
				"Neither NCCL nor the DataLoader fills it: raise podshaper.io/batch-bytes to make room, or mount the pod's own emptyDir at /dev/shm with the sizeLimit it needs (podshaper keeps it as written)."},
		{"a Mi of room", Run{Number: 1, Size: 7 * mi, Peak: 5 * mi, Ended: "Completed"}, nil, false,
			"peak 5Mi of 7Mi (71%) in run 1 (Completed): /dev/shm could be 6Mi (peak + 20% headroom)."},
		{"a byte more: just enough", Run{Number: 1, Size: 7 * mi, Peak: 5*mi + 1, Ended: "Completed"}, nil, false,
			"peak 6Mi of 7Mi (71%) in run 1 (Completed): /dev/shm was just enough or too small for this run. " +
				"Neither NCCL nor the DataLoader fills it: raise podshaper.io/batch-bytes to make room, or mount the pod's own emptyDir at /dev/shm with the sizeLimit it needs (podshaper keeps it as written)."},
		{"still running", Run{Number: 2, Size: 983 * mi, Peak: 0}, nil, false,
			"peak 0 of 983Mi (0%) in run 2: /dev/shm could be 1Mi (peak + 20% headroom)."},
	} {
		if got := UsageMessage(c.r, c.atEnd, c.user); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestLeftoversMessage(t *testing.T) {
	removed := TallyOf([]File{
		{Name: "nccl-a", Bytes: 32 * mi},
		{Name: "nccl-b", Bytes: 32 * mi},
		{Name: "nccl-c", Bytes: 32 * mi},
		{Name: "torch_1_1", Bytes: 8 * mi},
	}, false)
	const head = "removed 4 files (104Mi) a dead run left in /dev/shm before run 2 started: " +
		"NCCL segments: 3 files, 96Mi; DataLoader (torch_*): 1 file, 8Mi."
	for _, c := range []struct {
		name             string
		kept, notRemoved int
		want             string
	}{
		{"all removed", 0, 0, head},
		{"one kept", 1, 0, head + " Kept 1 file still open or mapped in the pod."},
		{"stopped", 0, 2, head + " Removal stopped at its deadline: 2 files left."},
		{"kept and stopped", 3, 1, head + " Kept 3 files still open or mapped in the pod." +
			" Removal stopped at its deadline: 1 file left."},
	} {
		if got := LeftoversMessage(2, removed, c.kept, c.notRemoved); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	one := TallyOf([]File{{Name: "__KMP_REGISTERED_LIB_9", Bytes: 4096}}, false)
	if got, want := LeftoversMessage(7, one, 0, 0),
		"removed 1 file (4Ki) a dead run left in /dev/shm before run 7 started: OpenMP (__KMP_REGISTERED_LIB_*): 1 file, 4Ki."; got != want {
		t.Errorf("one file:\n got %q\nwant %q", got, want)
	}
}

// An Event's message is cut at 1 KiB: every message stays below 1000 bytes with every kind
// and the largest numbers.
func TestMessageLength(t *testing.T) {
	var huge Tally
	for k := range NumKinds {
		huge.Files[k] = math.MaxInt / int(NumKinds)
		huge.Bytes[k] = math.MaxInt64 / int64(NumKinds)
	}
	huge.Partial = true
	r := Run{Number: math.MaxInt, Size: math.MaxInt64, Peak: math.MaxInt64, Ended: "OOMKilled (exit 137)"}
	small := r
	small.Size = 1
	msgs := map[string]string{
		"NearlyFull":         NearlyFullMessage(small, math.MaxInt64, huge, false),
		"NearlyFull user":    NearlyFullMessage(small, math.MaxInt64, huge, true),
		"Usage":              UsageMessage(small, &huge, false),
		"Usage user":         UsageMessage(small, &huge, true),
		"Usage could be":     UsageMessage(Run{Number: math.MaxInt, Size: math.MaxInt64, Peak: 1, Ended: r.Ended}, &huge, false),
		"Leftovers":          LeftoversMessage(math.MaxInt, huge, math.MaxInt, math.MaxInt),
		"NearlyFull torch":   NearlyFullMessage(r, math.MaxInt64, Tally{Files: huge.Files, Bytes: [NumKinds]int64{KindTorch: math.MaxInt64}, Partial: true}, false),
		"Usage torch at end": UsageMessage(r, &Tally{Files: huge.Files, Bytes: [NumKinds]int64{KindTorch: 1}, Partial: true}, false),
	}
	for name, m := range msgs {
		if len(m) >= 1000 {
			t.Errorf("%s: %d bytes: %s", name, len(m), m)
		}
		if !strings.Contains(m, "at least") {
			t.Errorf("%s does not carry the whole tally: %s", name, m)
		}
	}
}
