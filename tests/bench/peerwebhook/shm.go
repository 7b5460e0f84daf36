package main

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

const miB = 1 << 20

// dtypeNames lists every whole-byte dtype of torch 2.x; dtypeSizes adds PyTorch's aliases.
var dtypeNames = []string{"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz",
	"float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "complex128", "complex64",
	"complex32", "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8", "bool"}

var dtypeSizes = map[string]uint64{
	"float64": 8, "double": 8, "float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
	"float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1,
	"float8_e8m0fnu": 1, "float4_e2m1fn_x2": 1,
	"complex128": 16, "cdouble": 16, "complex64": 8, "cfloat": 8, "complex32": 4, "chalf": 4,
	"int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "short": 2, "int8": 1,
	"uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1,
}

// dtypeBytes is the element size of a PyTorch dtype name ("float32", "torch.bfloat16", ...).
func dtypeBytes(dtype string) (uint64, error) {
	if size, ok := dtypeSizes[strings.TrimPrefix(dtype, "torch.")]; ok {
		return size, nil
	}
	return 0, fmt.Errorf("unknown dtype \"%s\" (use one of %s, or give podshaper.io/batch-bytes)", cutUtf8(dtype, 64), strings.Join(dtypeNames, ", "))
}

// parseCount reads a non-negative decimal integer.
func parseCount(text string) (uint64, error) {
	switch {
	case text == "":
		return 0, errors.New("is empty; expected a non-negative integer")
	case text[0] == '-':
		return 0, fmt.Errorf("%s is negative; expected a non-negative integer", quoted(text, 64))
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%s is too large", quoted(text, 64))
	}
	if err != nil || text[0] == '+' {
		return 0, fmt.Errorf("%s is not a non-negative integer", quoted(text, 64))
	}
	return v, nil
}

// shapeBytes is the size of a tensor of shape "32x3x224x224" and the given dtype.
func shapeBytes(shape, dtype string) (uint64, error) {
	total, err := dtypeBytes(dtype)
	if err != nil {
		return 0, err
	}
	if shape == "" {
		return 0, errors.New("shape is empty (expected e.g. 32x3x224x224)")
	}
	q := quoted(shape, 64)
	if dims := strings.Count(shape, "x") + 1; dims > maxBatchDimensions {
		return 0, fmt.Errorf("shape %s has %d dimensions; at most %d (expected e.g. 32x3x224x224)", q, dims, maxBatchDimensions)
	}
	for _, dim := range strings.Split(shape, "x") {
		n, err := parseCount(dim)
		if err != nil {
			return 0, fmt.Errorf("shape %s: dimension %v (expected e.g. 32x3x224x224)", q, err)
		}
		if n == 0 {
			return 0, fmt.Errorf("shape %s has a zero dimension", q)
		}
		var ok bool
		if total, ok = mul(total, n); !ok {
			return 0, fmt.Errorf("shape %s overflows 64 bits", q)
		}
	}
	return total, nil
}

func mul(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0
}

func add(a, b uint64) (uint64, bool) {
	sum, carry := bits.Add64(a, b, 0)
	return sum, carry == 0
}

// mulDivCeil is ceil(a×b/c) without intermediate overflow.
func mulDivCeil(a, b, c uint64) (uint64, bool) {
	if c == 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(a, b)
	lo, carry := bits.Add64(lo, c-1, 0)
	hi += carry
	if hi >= c {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, c)
	return q, true
}

func ceilMiB(b uint64) uint64 { return b/miB + min(b%miB, 1) }

// formatBytes writes a byte count with the largest binary suffix that divides it.
func formatBytes(b uint64) string {
	if b == 0 {
		return "0"
	}
	suffixes := []string{"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"}
	for i, s := range suffixes {
		unit := uint64(1) << (10 * (6 - i))
		if b%unit == 0 {
			return strconv.FormatUint(b/unit, 10) + s
		}
	}
	return strconv.FormatUint(b, 10)
}

type batchSize struct {
	bytes  uint64
	source string // "batch-bytes 18Mi" or "32x3x224x224 float32"
}

type shmInputs struct {
	ranks, workers, prefetch uint64
	batch                    batchSize
	headroomPercent          uint64
	nccl                     ncclReserve // communicators per rank, the bytes of each, and why
}

type shmPlan struct {
	bytes   uint64 // a whole number of MiB
	formula string // the numbers in words (podshaper.io/shm-formula)
}

const (
	heldBatches     = 2        // the batch being handed over and the one in the training step
	dataLoaderExtra = miB      // per rank with workers: the DataLoader's semaphores
	minShm          = 64 * miB // never below the container runtime's default
)

func shmOverflow(what string) error {
	return shmOverflowCheck(what, "the batch size, workers, prefetch factor and ranks")
}

func shmOverflowCheck(what, check string) error {
	return fmt.Errorf("the /dev/shm size overflows 64 bits at %s; check %s", what, check)
}

// planShm is podshaper's "/dev/shm formula" (docs/webhook.md):
//
//	per_rank = (workers × prefetch + 2) × batch_bytes + 1Mi      (0 with no workers)
//	shm      = max(64Mi, ceil_MiB(ceil(ranks × per_rank × (100 + headroom) / 100))
//	                     + ceil_MiB(ranks × communicators × per_communicator))
func planShm(in shmInputs) (shmPlan, error) {
	var perRank uint64
	if in.workers > 0 {
		batches, ok := mul(in.workers, in.prefetch)
		if ok {
			batches, ok = add(batches, heldBatches)
		}
		if !ok {
			return shmPlan{}, shmOverflow("workers × prefetch")
		}
		bytes, ok := mul(batches, in.batch.bytes)
		if ok {
			bytes, ok = add(bytes, dataLoaderExtra)
		}
		if !ok {
			return shmPlan{}, shmOverflow("per-rank bytes")
		}
		perRank = bytes
	}
	payload, ok := mul(in.ranks, perRank)
	if !ok {
		return shmPlan{}, shmOverflow("ranks × per-rank bytes")
	}
	scaled, ok := mul(payload, 100+in.headroomPercent)
	if !ok {
		return shmPlan{}, shmOverflow("headroom")
	}
	withHeadroom := scaled/100 + min(scaled%100, 1)
	// Bytes first: a transport that keeps nothing is 0 at any count.
	reserve, ok := mul(in.nccl.communicators, in.nccl.perCommunicatorBytes)
	if ok {
		reserve, ok = mul(reserve, in.ranks)
	}
	if !ok {
		return shmPlan{}, shmOverflowCheck("the NCCL reserve", annNCCLCommunicators+" and the ranks")
	}
	totalMiB, ok := add(ceilMiB(withHeadroom), ceilMiB(reserve))
	if !ok {
		return shmPlan{}, shmOverflow("total")
	}
	shm, ok := mul(max(totalMiB, minShm/miB), miB)
	if !ok || shm > math.MaxInt64 {
		return shmPlan{}, shmOverflow("total")
	}

	var f strings.Builder
	fmt.Fprintf(&f, "%d ranks × ", in.ranks)
	if in.workers == 0 {
		f.WriteString("0 workers (the DataLoader makes its batches in the training process, none in /dev/shm) = 0 B")
	} else {
		fmt.Fprintf(&f, "((%d workers × prefetch %d + 2 held: the batch being handed over and the one in the training step) × %d B (%s) + %s for the DataLoader's semaphores) = %d B; +%d%% headroom = %d B",
			in.workers, in.prefetch, in.batch.bytes, in.batch.source, formatBytes(dataLoaderExtra), payload,
			in.headroomPercent, withHeadroom)
	}
	fmt.Fprintf(&f, " → %dMi", ceilMiB(withHeadroom))
	if in.nccl.transport == "" {
		f.WriteString("; no NCCL reserve")
	} else {
		per := "0 B"
		if in.nccl.perCommunicatorBytes != 0 {
			per = formatBytes(in.nccl.perCommunicatorBytes)
		}
		fmt.Fprintf(&f, "; + NCCL reserve %s × %s (%s) × %s per rank per communicator = %dMi",
			counted(in.ranks, "rank"), counted(in.nccl.communicators, "communicator"), in.nccl.communicatorsFrom, per,
			ceilMiB(reserve))
	}
	if in.nccl.why != "" {
		fmt.Fprintf(&f, " (%s)", in.nccl.why)
	}
	fmt.Fprintf(&f, "; /dev/shm = %s", formatBytes(shm))
	if totalMiB*miB < minShm {
		fmt.Fprintf(&f, " (at least %s, the container runtime's default)", formatBytes(minShm))
	}
	return shmPlan{bytes: shm, formula: f.String()}, nil
}

// counted is "1 rank", "2 ranks".
func counted(n uint64, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
