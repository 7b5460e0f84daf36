package main

import "testing"

// DESIGN.md's seed: 8 ranks, 8 workers, prefetch 4, 32x3x224x224 float32 → 5822Mi,
// 6334Mi with the NCCL reserve of 8 × 64Mi.
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
	}{{0, "5822Mi"}, {64 * miB, "6334Mi"}} {
		in.ncclReservePerRank = tc.reserve
		plan, err := planShm(in)
		if err != nil || formatBytes(plan.bytes) != tc.want {
			t.Fatalf("reserve %d: shm = %s, %v; want %s", tc.reserve, formatBytes(plan.bytes), err, tc.want)
		}
	}
	want := "8 ranks × (8 workers × prefetch 4 + 1) × 19267584 B (32x3x224x224 float32) = 5086642176 B; " +
		"+20% headroom = 6103970612 B → 5822Mi; + NCCL shm reserve 8 × 64Mi = 512Mi; /dev/shm = 6334Mi"
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
