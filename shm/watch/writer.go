package watch

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"podshaper.io/shm/kube"
	"podshaper.io/shm/usage"
)

// Writer is the Sink that talks to the API, on a goroutine of its own: Events at once;
// a ShmUsage at once when urgent (a run begun, ended or warned), else the newest one of
// each pod waits its turn: at most one such write per Budget.Every on this node, the pod
// that has waited longest first. Nothing is written while nothing changes.
type Writer struct {
	kube   kube.Client
	log    *slog.Logger
	now    func() time.Time
	budget usage.Budget

	mu      sync.Mutex
	wake    chan struct{}
	events  []event
	urgent  []kube.ShmUsage
	waiting map[kube.PodRef]pending

	// Counts of writes, for the metrics.
	Writes Counts
}

// Counts of API writes by kind.
type Counts struct {
	mu                     sync.Mutex
	Events, Usages, Failed int64
}

func (c *Counts) add(events, usages, failed int64) {
	c.mu.Lock()
	c.Events += events
	c.Usages += usages
	c.Failed += failed
	c.mu.Unlock()
}

// Get returns the counts.
func (c *Counts) Get() (events, usages, failed int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Events, c.Usages, c.Failed
}

type event struct {
	pod                  kube.PodRef
	typ, reason, message string
	tries                int
}

// eventTries: an Event the API server failed to take (not refused) is tried this often.
const eventTries = 5

type pending struct {
	u     kube.ShmUsage
	since time.Time
}

// NewWriter returns a Writer that writes at most one routine ShmUsage per `every`.
func NewWriter(k kube.Client, every time.Duration, log *slog.Logger, now func() time.Time) *Writer {
	return &Writer{kube: k, log: log, now: now, budget: usage.Budget{Every: every},
		wake: make(chan struct{}, 1), waiting: map[kube.PodRef]pending{}}
}

func (w *Writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Event implements Sink.
func (w *Writer) Event(pod kube.PodRef, typ, reason, message string) {
	w.mu.Lock()
	w.events = append(w.events, event{pod: pod, typ: typ, reason: reason, message: message})
	w.mu.Unlock()
	w.poke()
}

// Usage implements Sink.
func (w *Writer) Usage(u kube.ShmUsage, urgent bool) {
	w.mu.Lock()
	if urgent {
		delete(w.waiting, u.Pod)
		w.urgent = append(w.urgent, u)
	} else {
		since := w.now()
		if p, ok := w.waiting[u.Pod]; ok {
			since = p.since
		}
		w.waiting[u.Pod] = pending{u, since}
	}
	w.mu.Unlock()
	w.poke()
}

// Run writes until stop is closed; every `tick` it looks whether a routine write is due.
func (w *Writer) Run(stop <-chan struct{}, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		w.Flush()
		select {
		case <-stop:
			w.Flush()
			return
		case <-w.wake:
		case <-t.C:
		}
	}
}

// Flush writes what is due now.
func (w *Writer) Flush() {
	w.mu.Lock()
	events, urgent := w.events, w.urgent
	w.events, w.urgent = nil, nil
	var routine *kube.ShmUsage
	if len(urgent) > 0 {
		w.budget.Allow(w.now(), true) // an urgent write restarts the routine writes' clock
	} else if len(w.waiting) > 0 && w.budget.Allow(w.now(), false) {
		var oldest kube.PodRef
		first := true
		for ref, p := range w.waiting {
			if first || p.since.Before(w.waiting[oldest].since) {
				oldest, first = ref, false
			}
		}
		u := w.waiting[oldest].u
		routine = &u
		delete(w.waiting, oldest)
	}
	w.mu.Unlock()
	for _, e := range events {
		err := w.kube.Event(e.pod, e.typ, e.reason, e.message)
		w.count(err, 1, 0, "event", e.pod, e.reason)
		if err != nil && !kube.Permanent(err) && e.tries+1 < eventTries {
			e.tries++
			w.mu.Lock()
			w.events = append(w.events, e) // told again at the next flush (a second later)
			w.mu.Unlock()
		}
	}
	if routine != nil {
		urgent = append(urgent, *routine)
	}
	for i, u := range urgent {
		if err := w.kube.PutUsage(&u); err != nil {
			w.count(err, 0, 1, "ShmUsage", u.Pod, "")
			if !kube.Permanent(err) && !slices.ContainsFunc(urgent[i+1:], func(v kube.ShmUsage) bool { return v.Pod == u.Pod }) {
				w.retry(u)
			}
			continue
		}
		w.count(nil, 0, 1, "ShmUsage", u.Pod, "")
	}
}

// retry puts a failed write back in line, unless a newer one for the pod was handed since.
func (w *Writer) retry(u kube.ShmUsage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.waiting[u.Pod]; ok {
		return
	}
	if slices.ContainsFunc(w.urgent, func(v kube.ShmUsage) bool { return v.Pod == u.Pod }) {
		return
	}
	w.waiting[u.Pod] = pending{u, w.now()}
}

func (w *Writer) count(err error, events, usages int64, what string, pod kube.PodRef, reason string) {
	if err != nil {
		w.Writes.add(0, 0, 1)
		w.log.Warn("API write failed", "what", what, "reason", reason, "pod", pod.Namespace+"/"+pod.Name, "error", err)
		return
	}
	w.Writes.add(events, usages, 0)
}
