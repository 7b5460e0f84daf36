package main

import "testing"

// The seed: 8 ranks, 8 workers, prefetch 4, 32x3x224x224 float32 → 6008Mi, 7032Mi with
// the NCCL reserve of 8 × 128Mi (no P2P known).
func TestSeedShm(t *testing.T) {
	batch, err := shapeBytes("32x3x224x224", "float32")
	if err != nil || batch != 19267584 {
		t.Fatalf("batch = %d, %v", batch, err)
	}
	in := shmInputs{ranks: 8, workers: 8, prefetch: 4, headroomPercent: 20,
		batch: batchSize{bytes: batch, source: "32x3x224x224 float32"}}
	for _, tc := range []struct {
		reserve uint64
		want    string
	}{{0, "6008Mi"}, {128 * miB, "7032Mi"}} {
		in.ncclReservePerRank = tc.reserve
		plan, err := planShm(in)
		if err != nil || formatBytes(plan.bytes) != tc.want {
			t.Fatalf("reserve %d: shm = %s, %v; want %s", tc.reserve, formatBytes(plan.bytes), err, tc.want)
		}
	}
	want := "8 ranks × ((8 workers × prefetch 4 + 2 held: the batch being handed over and the one in the training step) × " +
		"19267584 B (32x3x224x224 float32) + 1Mi for the DataLoader's semaphores) = 5249171456 B; " +
		"+20% headroom = 6299005748 B → 6008Mi; + NCCL shm reserve 8 × 128Mi = 1024Mi; /dev/shm = 7032Mi"
	if plan, _ := planShm(in); plan.formula != want {
		t.Errorf("formula\n got %s\nwant %s", plan.formula, want)
	}
}

func TestOverflowIsAnError(t *testing.T) {
	if _, err := planShm(shmInputs{ranks: 8, workers: 1 << 40, prefetch: 1 << 30, batch: batchSize{bytes: 1}}); err == nil {
		t.Error("no overflow error")
	}
	if q, ok := mulDivCeil(1<<63, 4, 8); !ok || q != 1<<62 {
		t.Errorf("mulDivCeil = %d, %v", q, ok)
	}
}

func TestNoWorkersIsTheFloor(t *testing.T) {
	plan, err := planShm(shmInputs{ranks: 4, workers: 0, prefetch: 2, batch: batchSize{bytes: 32 * miB}})
	if err != nil || plan.bytes != 64*miB {
		t.Fatalf("shm = %d, %v; want 64Mi", plan.bytes, err)
	}
}

// The default config's hash is podshaper's (tests/golden's shaped-by), so both name it alike.
func TestDefaultConfigHashIsPodshapers(t *testing.T) {
	cfg := DefaultConfig()
	if got := cfg.Hash(); got != "976b32a8a930679c" {
		t.Errorf("Hash() = %s, want podshaper's 976b32a8a930679c", got)
	}
}
