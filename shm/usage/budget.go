package usage

import "time"

// Budget bounds API writes per node: at most one per Every (30 s) unless urgent (a
// threshold crossed, a run begun or ended); nothing when nothing changed is the caller's.
type Budget struct {
	Every time.Duration
	last  time.Time
}

// Allow says whether a write may go now, and if so takes it: always when urgent, else
// when no write was taken yet or the last one was at least Every before now. An urgent
// write counts as the last one too.
func (b *Budget) Allow(now time.Time, urgent bool) bool {
	if !urgent && !b.last.IsZero() && now.Sub(b.last) < b.Every {
		return false
	}
	b.last = now
	return true
}
