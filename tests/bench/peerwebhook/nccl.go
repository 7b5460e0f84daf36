package main

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// torchrun's node count: its --nnodes flag, else this environment variable (Kubeflow's
// PyTorchJob and Trainer set it); --standalone is one node (api/names.h).
const (
	nnodesEnv      = "PET_NNODES"
	nnodesFlag     = "--nnodes"
	standaloneFlag = "--standalone"
	// NCCL's own switch that turns P2P off (its SHM transport between the pod's ranks).
	ncclP2PDisableEnv = "NCCL_P2P_DISABLE"
	// What one command word may grow to by $(NAME) expansion (podshaper's kMaxExpandedWord):
	// expansion stops at the $(NAME) that would take it past.
	maxExpandedWord = 1024
)

type spanKind int

const (
	spanUnknown spanKind = iota
	spanOneNode
	spanManyNodes
)

// jobSpan is whether the pod's ranks talk to ranks on other nodes, as the pod tells it.
type jobSpan struct {
	kind   spanKind
	source string // `PET_NNODES=1 in container "trainer"`, or why unknown
}

// spanOf reads torchrun's node count: "N", or "MIN:MAX" (MIN <= MAX), whose maximum says
// how many nodes the job may span.
func spanOf(value, where string) jobSpan {
	most, least := value, value
	if i := strings.IndexByte(value, ':'); i >= 0 {
		least, most = value[:i], value[i+1:]
	}
	n, err := parseCount(most)
	m, err2 := parseCount(least)
	switch {
	case err != nil || err2 != nil || m == 0 || m > n:
		return jobSpan{spanUnknown, where + " is not a node count"}
	case n == 1:
		return jobSpan{spanOneNode, where}
	}
	return jobSpan{spanManyNodes, where}
}

// isSpace is the C locale's isspace, as podshaper's word split (an istringstream) uses.
func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// literalEnv is the container's env as the kubelet sets it: each name's literal value (the
// last entry of a name wins); nil for one set through valueFrom.
func literalEnv(c *corev1.Container) map[string]*string {
	out := map[string]*string{}
	for i := range c.Env {
		e := &c.Env[i]
		if e.ValueFrom != nil {
			out[e.Name] = nil
			continue
		}
		v := e.Value
		out[e.Name] = &v
	}
	return out
}

// expand is Kubernetes' $(NAME) expansion in command and args, from the container's env,
// up to maxExpandedWord bytes: the rest of the word is left unexpanded.
func expand(word string, env map[string]*string) string {
	at := strings.Index(word, "$(")
	for at >= 0 {
		end := strings.IndexByte(word[at:], ')')
		if end < 0 {
			break
		}
		end += at
		next := end
		if v, ok := env[word[at+2:end]]; ok && v != nil {
			if len(word)-(end-at+1)+len(*v) > maxExpandedWord {
				break
			}
			word = word[:at] + *v + word[end+1:]
			next = at + len(*v)
		}
		i := strings.Index(word[next:], "$(")
		if i < 0 {
			break
		}
		at = next + i
	}
	return word
}

// words are the words of the container's command and args: a list, or a shell line in one string.
func words(c *corev1.Container, env map[string]*string) []string {
	var out []string
	for _, list := range [][]string{c.Command, c.Args} {
		for _, item := range list {
			for _, w := range strings.FieldsFunc(item, isSpace) {
				out = append(out, expand(w, env))
			}
		}
	}
	return out
}

// readJobSpan is torchrun's node count in one container: --standalone or --nnodes in its
// command and args (every torchrun counts, and the flag wins, as in torchrun), else its
// env PET_NNODES ("N" or "MIN:MAX").
func readJobSpan(c *corev1.Container) jobSpan {
	in := " in container " + quoted(c.Name, 100)
	env := literalEnv(c)
	w := words(c, env)
	var fromFlags *jobSpan
	add := func(s jobSpan) {
		if fromFlags != nil {
			s = combineJobSpans(*fromFlags, s)
		}
		fromFlags = &s
	}
	for i := range w {
		if w[i] == standaloneFlag {
			add(jobSpan{spanOneNode, "torchrun " + w[i] + in})
		}
		if strings.HasPrefix(w[i], nnodesFlag+"=") {
			add(spanOf(w[i][len(nnodesFlag)+1:], "torchrun "+cutUtf8(w[i], 64)+in))
		}
		if w[i] == nnodesFlag && i+1 < len(w) {
			add(spanOf(w[i+1], "torchrun "+nnodesFlag+" "+cutUtf8(w[i+1], 64)+in))
		}
	}
	if fromFlags != nil {
		return *fromFlags
	}
	v, ok := env[nnodesEnv]
	switch {
	case !ok:
		return jobSpan{spanUnknown, "no torchrun " + nnodesFlag + " or " + nnodesEnv + in}
	case v == nil:
		return jobSpan{spanUnknown, nnodesEnv + " from valueFrom" + in}
	}
	return spanOf(*v, nnodesEnv+"="+cutUtf8(*v, 64)+in)
}

// readP2POff is NCCL_P2P_DISABLE=1 in the container's env, in words, or "".
func readP2POff(c *corev1.Container) string {
	if v, ok := literalEnv(c)[ncclP2PDisableEnv]; ok && v != nil && *v == "1" {
		return ncclP2PDisableEnv + "=1 in container " + quoted(c.Name, 100)
	}
	return ""
}

// combineJobSpans is the pod's span over its GPU containers: many if any says so, one
// if all say one.
func combineJobSpans(a, b jobSpan) jobSpan {
	switch {
	case a.kind == spanManyNodes:
		return a
	case b.kind == spanManyNodes:
		return b
	case a.kind == spanUnknown:
		return a
	}
	return b
}

type ncclReserveInputs struct {
	ranks             uint64
	communicators     uint64
	communicatorsFrom string // "podshaper.io/nccl-communicators" or the config key
	span              jobSpan
	p2pAllPairs       bool // always false in the peer: it has no cluster view
	costs             ncclShmCosts
	p2pOff            string // NCCL_P2P_DISABLE=1 in a GPU container, in words
}

// ncclShmCosts are the config's ncclShmPerCommunicator, in bytes.
type ncclShmCosts struct{ net, p2p, shm uint64 }

type ncclReserve struct {
	communicators        uint64
	communicatorsFrom    string
	perCommunicatorBytes uint64 // per rank
	transport            string // "NET", "SHM", "P2P", or "" with no NCCL
	why                  string // the transport and why, for the formula
}

// planNcclReserve picks the transport NCCL will use: of those the ranks may use, the one
// that costs most (podshaper's planNcclReserve, shaping/nccl.cc).
func planNcclReserve(in ncclReserveInputs) ncclReserve {
	r := ncclReserve{communicators: in.communicators, communicatorsFrom: in.communicatorsFrom}
	if in.communicators == 0 {
		r.why = in.communicatorsFrom + " is 0: the pod runs no NCCL"
		return r
	}
	oneNode := in.span.kind == spanOneNode
	if oneNode && in.ranks <= 1 {
		r.why = "one rank on one node (" + in.span.source + "): NCCL connects to no peer"
		return r
	}
	// A rank's proxy pool is one per communicator whichever transports need it, so the
	// costs do not add up.
	type option struct {
		transport string
		bytes     uint64
		why       string
	}
	var options []option
	if !oneNode {
		where := "the job may span nodes (" + in.span.source + "; set torchrun " + nnodesFlag + " or " + nnodesEnv +
			" to 1 for a one-node job)"
		if in.span.kind == spanManyNodes {
			where = "the job spans nodes (" + in.span.source + ")"
		}
		options = append(options, option{"NET", in.costs.net, where +
			", and NCCL's proxy keeps a pool per rank per communicator for its network connections: config " +
			"ncclShmPerCommunicator.net"})
	}
	p2p := in.p2pAllPairs && in.p2pOff == ""
	if in.ranks > 1 && !p2p {
		why := "P2P between all GPU pairs is not known to hold on the nodes the pod may land on"
		if in.p2pOff != "" {
			why = in.p2pOff + " turns P2P off"
		}
		options = append(options, option{"SHM", in.costs.shm, why +
			", so NCCL may use its SHM transport between the pod's ranks, with its proxy pool and receive " +
			"buffers in /dev/shm (sized as if its cuMem host memory were refused, as a RuntimeDefault seccomp profile " +
			"refuses it): config ncclShmPerCommunicator.shm"})
	}
	if in.ranks > 1 && p2p {
		options = append(options, option{"P2P", in.costs.p2p,
			"the pod's ranks read each other's GPUs directly (target nodes validated with P2P between " +
				"all GPU pairs), and NCCL's P2P over cuMem keeps nothing in /dev/shm: config " +
				"ncclShmPerCommunicator.p2p"})
	}
	most := options[0]
	for _, o := range options[1:] {
		if o.bytes > most.bytes {
			most = o
		}
	}
	r.transport = most.transport
	r.perCommunicatorBytes = most.bytes
	if oneNode {
		r.why = r.transport + " on one node (" + in.span.source + "): " + most.why
	} else {
		r.why = r.transport + ": " + most.why
	}
	return r
}
