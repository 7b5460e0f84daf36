package watch

import (
	"strconv"
	"testing"
	"time"

	"podshaper.io/shm/kube"
)

const every = 30 * time.Second

func newTestWriter() (*Writer, *fakeKube, *clock) {
	c, k := newClock(), newFakeKube()
	return NewWriter(k, every, quietLog(), c.now), k, c
}

// usageOf: pod's ShmUsage, told apart by its use.
func usageOf(pod string, used int64) kube.ShmUsage {
	return kube.ShmUsage{Pod: shapedPod(pod).Ref, Node: "node-1", Volume: ShmVolume, Size: 1000, Used: used}
}

// written: the pods and uses that PutUsage got since `from` calls, as "pod:used".
func written(k *fakeKube, from int) []string {
	_, puts := k.sent()
	var out []string
	for _, u := range puts[from:] {
		out = append(out, u.Pod.Name+":"+strconv.FormatInt(u.Used, 10))
	}
	return out
}

func checkWritten(t *testing.T, what string, k *fakeKube, from int, want ...string) int {
	t.Helper()
	got := written(k, from)
	if len(got) != len(want) {
		t.Errorf("%s: written %v, want %v", what, got, want)
		return from + len(got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: written %v, want %v", what, got, want)
			break
		}
	}
	return from + len(got)
}

func TestWriterNothingHanded(t *testing.T) {
	w, k, c := newTestWriter()
	for range 5 {
		w.Flush()
		c.advance(every)
	}
	events, puts := k.sent()
	if len(events) > 0 || len(puts) > 0 {
		t.Errorf("nothing handed, yet events %+v, usages %+v were written", events, puts)
	}
	if e, u, f := w.Writes.Get(); e != 0 || u != 0 || f != 0 {
		t.Errorf("Counts = %d, %d, %d", e, u, f)
	}
}

// Events and urgent usages go at once, whatever the budget; routine ones wait for it.
func TestWriterAtOnce(t *testing.T) {
	w, k, c := newTestWriter()
	w.Usage(usageOf("a", 1), false)
	w.Flush()
	n := checkWritten(t, "the first routine usage", k, 0, "a:1")

	c.advance(time.Second)
	w.Event(shapedPod("b").Ref, "Warning", ReasonNearlyFull, "95% full")
	w.Usage(usageOf("b", 2), true)
	w.Usage(usageOf("c", 3), false)
	w.Flush()
	n = checkWritten(t, "an urgent usage 1 s later", k, n, "b:2")
	events, _ := k.sent()
	if len(events) != 1 || events[0] != (sentEvent{shapedPod("b").Ref, "Warning", ReasonNearlyFull, "95% full"}) {
		t.Errorf("events %+v", events)
	}
	for i := range 3 {
		c.advance(time.Second)
		w.Event(shapedPod("c").Ref, "Normal", ReasonUsage, "peak")
		w.Usage(usageOf("d", int64(10+i)), true)
		w.Flush()
	}
	n = checkWritten(t, "urgent usages a second apart", k, n, "d:10", "d:11", "d:12")
	if events, _ := k.sent(); len(events) != 4 {
		t.Errorf("%d events written, want 4", len(events))
	}
	// The urgent writes restarted the routine writes' clock: c waits 30 s after the last.
	c.advance(every - time.Second)
	w.Flush()
	n = checkWritten(t, "29 s after an urgent write", k, n)
	c.advance(time.Second)
	w.Flush()
	checkWritten(t, "30 s after an urgent write", k, n, "c:3")
}

// At most one routine usage per `every`: the pod that waited longest first, with its newest.
func TestWriterRoutine(t *testing.T) {
	w, k, c := newTestWriter()
	w.Usage(usageOf("a", 1), false)
	w.Flush()
	n := checkWritten(t, "the first", k, 0, "a:1")

	c.advance(time.Second)
	w.Usage(usageOf("b", 1), false)
	c.advance(time.Second)
	w.Usage(usageOf("c", 1), false)
	c.advance(time.Second)
	w.Usage(usageOf("b", 2), false) // replaces b's first, keeps its place
	w.Usage(usageOf("a", 2), false)
	w.Flush()
	n = checkWritten(t, "3 s after the first", k, n)

	for i, want := range []string{"b:2", "c:1", "a:2"} {
		c.t = t0.Add(time.Duration(i+1)*every - time.Second)
		w.Flush()
		n = checkWritten(t, "within the budget", k, n)
		c.t = t0.Add(time.Duration(i+1) * every)
		w.Flush()
		w.Flush()
		n = checkWritten(t, "turn "+strconv.Itoa(i), k, n, want)
	}
	c.advance(every)
	w.Flush()
	checkWritten(t, "nothing waits", k, n)

	// An urgent usage takes the place of the routine one of its pod.
	w.Usage(usageOf("a", 3), false)
	w.Usage(usageOf("a", 4), true)
	w.Flush()
	n = checkWritten(t, "urgent over routine", k, n, "a:4")
	c.advance(every)
	w.Flush()
	checkWritten(t, "the routine one it replaced", k, n)
}

// A failed write is tried again later, unless something newer of its pod came since.
func TestWriterRetry(t *testing.T) {
	w, k, c := newTestWriter()
	k.failPuts = 1
	w.Usage(usageOf("a", 1), true)
	w.Flush()
	n := checkWritten(t, "the failed write", k, 0)
	if e, u, f := w.Writes.Get(); e != 0 || u != 0 || f != 1 {
		t.Errorf("after a failure: Counts = %d, %d, %d", e, u, f)
	}
	w.Flush()
	n = checkWritten(t, "at once again", k, n)
	c.advance(every)
	w.Flush()
	n = checkWritten(t, "a budget later", k, n, "a:1")

	// Two urgent usages of a pod in one flush, the first failing: the second stands.
	k.failPuts = 1
	w.Usage(usageOf("b", 1), true)
	w.Usage(usageOf("b", 2), true)
	w.Flush()
	n = checkWritten(t, "the older one failed", k, n, "b:2")
	c.advance(every)
	w.Flush()
	n = checkWritten(t, "the older one not tried again", k, n)

	// A failed one, and a newer routine one of its pod handed since: the newer is written.
	k.failPuts = 1
	w.Usage(usageOf("c", 1), true)
	w.Flush()
	w.Usage(usageOf("c", 2), false)
	c.advance(every)
	w.Flush()
	c.advance(every)
	w.Flush()
	n = checkWritten(t, "the newer one", k, n, "c:2")

	// A failed one, and a newer urgent one handed while it was written.
	k.failPuts = 1
	k.duringPut = func(u *kube.ShmUsage) {
		if u.Used == 1 {
			w.Usage(usageOf("d", 2), true)
		}
	}
	w.Usage(usageOf("d", 1), true)
	w.Flush()
	w.Flush()
	c.advance(every)
	w.Flush()
	checkWritten(t, "the one handed while writing", k, n, "d:2")
	_, puts := k.sent()
	if got := k.usages[shapedPod("b").Ref].Used; got != 2 {
		t.Errorf("b's ShmUsage has use %d, want the newest, 2", got)
	}
	if e, u, f := w.Writes.Get(); e != 0 || u != int64(len(puts)) || f != 4 {
		t.Errorf("Counts = %d, %d, %d; want 0, %d, 4", e, u, f, len(puts))
	}
}

func TestWriterCounts(t *testing.T) {
	w, k, _ := newTestWriter()
	k.failEvents, k.failPuts = 1, 1
	ref := shapedPod("a").Ref
	w.Event(ref, "Normal", ReasonUsage, "one")
	w.Event(ref, "Normal", ReasonUsage, "two")
	w.Event(ref, "Normal", ReasonUsage, "three")
	w.Usage(usageOf("a", 1), true)
	w.Usage(usageOf("b", 1), true)
	w.Usage(usageOf("c", 1), true)
	w.Flush()
	if e, u, f := w.Writes.Get(); e != 2 || u != 2 || f != 2 {
		t.Errorf("Counts = %d events, %d usages, %d failed; want 2, 2, 2", e, u, f)
	}
	if events, _ := k.sent(); len(events) != 2 || events[0].message != "two" {
		t.Errorf("events %+v", events)
	}
}

// Run writes what is handed, and returns once stopped.
func TestWriterRun(t *testing.T) {
	w, k, _ := newTestWriter()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { w.Run(stop, time.Hour); close(done) }()
	w.Event(shapedPod("a").Ref, "Warning", ReasonNearlyFull, "full")
	w.Usage(usageOf("a", 1), true)
	deadline := time.Now().Add(10 * time.Second)
	for {
		events, puts := k.sent()
		if len(events) == 1 && len(puts) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not written in 10 s: events %+v, usages %+v", events, puts)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once stopped")
	}
}

// An Event the API server failed to take is told again, at most eventTries times; one it
// refused (a 4xx but 409 and 429) is not, nor is a ShmUsage it refused.
func TestWriterTriesAgainUnlessRefused(t *testing.T) {
	w, k, _ := newTestWriter()
	pod := shapedPod("a").Ref
	k.failEvents = 2
	w.Event(pod, "Warning", ReasonNearlyFull, "full")
	w.Flush()
	w.Flush()
	w.Flush()
	if events, _ := k.sent(); len(events) != 1 || events[0].reason != ReasonNearlyFull {
		t.Errorf("after two failures: told %+v, want the Event once", events)
	}
	k.failEvents = eventTries + 1
	w.Event(pod, "Normal", ReasonUsage, "peak")
	for range eventTries + 2 {
		w.Flush()
	}
	if events, _ := k.sent(); len(events) != 1 {
		t.Errorf("failing every time: told %+v, want it given up after %d tries", events, eventTries)
	}
	if k.failEvents != 1 {
		t.Errorf("tried %d times, want %d", eventTries+1-k.failEvents, eventTries)
	}

	k.failEvents, k.failWith = 1, &kube.APIError{Method: "POST", Path: "/api/v1/namespaces/ml/events", Code: 403, Reason: "Forbidden"}
	w.Event(pod, "Normal", ReasonUsage, "refused")
	w.Flush()
	w.Flush()
	k.failPuts = 1
	w.Usage(usageOf("a", 1), true)
	w.Flush()
	w.Flush()
	if events, puts := k.sent(); len(events) != 1 || len(puts) != 0 {
		t.Errorf("refused: told %+v, wrote %+v; want neither tried again", events, puts)
	}
}
