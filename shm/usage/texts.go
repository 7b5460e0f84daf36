package usage

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

const (
	ki int64 = 1 << 10
	mi int64 = 1 << 20
)

// nearlyFullPercent and headroomPercent: NearlyFullFraction and Headroom in whole percent.
const (
	nearlyFullPercent = NearlyFullFraction * 100
	headroomPercent   = Headroom * 100
)

// Suggest: peak × (1 + Headroom), rounded up to a whole Mi (never below 1Mi; at most the
// largest whole Mi an int64 holds).
func Suggest(peak int64) int64 {
	if peak <= 0 {
		return mi
	}
	hi, lo := bits.Mul64(uint64(peak), 100+headroomPercent)
	q, r := bits.Div64(hi, lo, 100*uint64(mi))
	if r != 0 {
		q++
	}
	if q > math.MaxInt64/uint64(mi) {
		return math.MaxInt64 &^ (mi - 1)
	}
	return int64(q) * mi
}

// Quantity: bytes as Kubernetes writes a quantity, in binary units, rounded up to the unit
// shown: Ki below 1Mi ("12Ki"), else Mi ("412Mi", "1536Mi", "1024Mi"), and Gi from 10Gi
// when the Mi are whole Gi ("16Gi"; "10241Mi" is not). 0 or less: "0".
func Quantity(bytes int64) string {
	if bytes <= 0 {
		return "0"
	}
	if k := ceilDiv(bytes, ki); k < 1024 {
		return strconv.FormatInt(k, 10) + "Ki"
	}
	m := ceilDiv(bytes, mi)
	if m >= 10*1024 && m%1024 == 0 {
		return strconv.FormatInt(m/1024, 10) + "Gi"
	}
	return strconv.FormatInt(m, 10) + "Mi"
}

// ceilDiv: a / b rounded up, for a ≥ 0 and b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// percent: part of whole in whole percent, rounded down; 0 when either is 0 or less.
func percent(part, whole int64) int64 {
	if part <= 0 || whole <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(part), 100)
	if hi >= uint64(whole) { // the quotient does not fit 64 bits
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(whole))
	return int64(min(q, math.MaxInt64))
}

// The sentences of Advice.
const (
	adviceNCCL  = "Raise podshaper.io/nccl-communicators if the job makes more communicators than it says."
	adviceTorch = "Raise podshaper.io/batch-bytes (or batch-shape), podshaper.io/dataloader-workers " +
		"or podshaper.io/prefetch-factor to what the DataLoader really holds."
	// podshaper.io/shm-size is what the webhook wrote, not an input: the room for other files
	// comes from the DataLoader's part of the formula, or from a volume of the pod's own.
	adviceSize = "Neither NCCL nor the DataLoader fills it: raise podshaper.io/batch-bytes to make room, " +
		"or mount the pod's own emptyDir at /dev/shm with the sizeLimit it needs (podshaper keeps it as written)."
	adviceUserVolume = "This pod mounts its own emptyDir at /dev/shm: raise its sizeLimit " +
		"(and the memory limit that pays for it)."
)

// Advice names what to raise when /dev/shm is nearly full, from the kind that holds the
// most bytes (the first in Kind's order on a tie): NCCL segments →
// podshaper.io/nccl-communicators; DataLoader (torch) → podshaper.io/batch-bytes (or
// batch-shape), podshaper.io/dataloader-workers, podshaper.io/prefetch-factor; any other
// kind or nothing known → podshaper.io/batch-bytes, or a volume of the pod's own. userVolume: the pod mounts its own
// emptyDir at /dev/shm, whose sizeLimit is the user's to raise (podshaper's annotations do
// not size it).
func Advice(t Tally, userVolume bool) string {
	if userVolume {
		return adviceUserVolume
	}
	most, mostBytes := KindOther, int64(0)
	for k := range NumKinds {
		if t.Bytes[k] > mostBytes {
			most, mostBytes = k, t.Bytes[k]
		}
	}
	switch most {
	case KindNCCL:
		return adviceNCCL
	case KindTorch:
		return adviceTorch
	default:
		return adviceSize
	}
}

// NearlyFullMessage: the ShmNearlyFull Event's text, of run r (its Number and Size) at use
// `used`, holding t. E.g.
// "/dev/shm is 92% full in run 2: 905Mi of 983Mi used. It holds NCCL segments: 3 files,
// 96Mi; DataLoader (torch_*): 40 files, 800Mi. <Advice>"
func NearlyFullMessage(r Run, used int64, t Tally, userVolume bool) string {
	return fmt.Sprintf("/dev/shm is %d%% full in run %d: %s of %s used. It holds %s. %s",
		percent(used, r.Size), r.Number, Quantity(used), Quantity(r.Size), t.Words(), Advice(t, userVolume))
}

// UsageMessage: the ShmUsage Event's text when run r ends. E.g.
// "peak 412Mi of 983Mi (41%) in run 1 (Completed): /dev/shm could be 495Mi (peak + 20% headroom)."
// When Suggest(peak) is not below the size: "peak 950Mi of 983Mi (96%) in run 1 (Completed):
// /dev/shm was just enough or too small for this run. <Advice>", the advice from atEnd when
// given. When atEnd is given and holds a file: " At the end it held <Words>." after either.
// Percentages are rounded down; "(how)" only when the run has ended.
func UsageMessage(r Run, atEnd *Tally, userVolume bool) string {
	msg := fmt.Sprintf("peak %s of %s (%d%%) in run %d",
		Quantity(r.Peak), Quantity(r.Size), percent(r.Peak, r.Size), r.Number)
	if r.Ended != "" {
		msg += " (" + r.Ended + ")"
	}
	if s := Suggest(r.Peak); s < r.Size {
		msg += fmt.Sprintf(": /dev/shm could be %s (peak + %d%% headroom).", Quantity(s), int(headroomPercent))
	} else {
		var t Tally
		if atEnd != nil {
			t = *atEnd
		}
		msg += ": /dev/shm was just enough or too small for this run. " + Advice(t, userVolume)
	}
	if atEnd != nil {
		if n, _ := atEnd.Total(); n > 0 {
			msg += " At the end it held " + atEnd.Words() + "."
		}
	}
	return msg
}

// LeftoversMessage: the ShmLeftoversRemoved Event's text, e.g. "removed 4 files (104Mi) a
// dead run left in /dev/shm before run 2 started: NCCL segments: 3 files, 96Mi; DataLoader
// (torch_*): 1 file, 8Mi." plus " Kept 1 file still open or mapped in the pod." when
// kept > 0, plus " Removal stopped at its deadline: 2 files left." when notRemoved > 0.
func LeftoversMessage(run int, removed Tally, kept int, notRemoved int) string {
	n, b := removed.Total()
	msg := fmt.Sprintf("removed %s (%s) a dead run left in /dev/shm before run %d started: %s.",
		fileCount(n), Quantity(b), run, removed.Words())
	if kept > 0 {
		msg += " Kept " + fileCount(kept) + " still open or mapped in the pod."
	}
	if notRemoved > 0 {
		msg += " Removal stopped at its deadline: " + fileCount(notRemoved) + " left."
	}
	return msg
}
